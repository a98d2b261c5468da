//go:build linux

package serveproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child if the process that
// started it dies without stopping it (a panic, a killed go test), so no
// broker outlives its tests.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
