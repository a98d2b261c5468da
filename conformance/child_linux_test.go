//go:build linux

package conformance

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child broker if the test binary
// dies without stopping it (a panic, a killed go test), so no broker
// outlives its tests.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
