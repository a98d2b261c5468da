//go:build !linux

package serveproc

import "os/exec"

// dieWithParent has no portable equivalent off Linux: the callers stop
// their children, and a crashed test run may leave one running.
func dieWithParent(*exec.Cmd) {}
