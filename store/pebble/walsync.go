//go:build !busbar_ackbeforesync

package pebble

// skipWALSync is false: the WAL is fsynced before a commit is acknowledged.
// The build tag busbar_ackbeforesync makes it true (walsync_broken.go).
const skipWALSync = false
