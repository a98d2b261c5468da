//go:build unix

package benchcore

import "syscall"

// writeBack writes the system's dirty pages to disk (sync(2)); a variable
// for tests.
var writeBack = syscall.Sync
