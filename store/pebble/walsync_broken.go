//go:build busbar_ackbeforesync

package pebble

// skipWALSync, in a build with the tag busbar_ackbeforesync, turns the
// WAL's fsyncs into no-ops: a commit is written to the operating system
// (the page cache) and acknowledged, but never forced to disk. This build
// is deliberately broken. It exists only so the power-loss test (crashtest;
// docs/reliability.md) can show that it catches a broker that acknowledges
// before fsync, which a SIGKILL cannot tell from a correct build.
const skipWALSync = true
