//go:build busbar_ackbeforesync

package pebble

import "github.com/cockroachdb/pebble/v2"

// walSync, in a build with the tag busbar_ackbeforesync, writes the WAL
// without fsync: commits are acknowledged while still in the page cache.
// This build is deliberately broken. It exists only so the power-loss test
// (crashtest, docs/reliability.md) can show that it catches a broker that
// acknowledges before fsync; a SIGKILL cannot tell it from a correct build.
var walSync = pebble.NoSync
