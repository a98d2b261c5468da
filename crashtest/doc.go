// Package crashtest holds Busbar's end-to-end reliability tests: a real
// `busbar serve` child process, loaded through the official Go SDK
// (azservicebus), killed with SIGKILL in the middle of the load, restarted
// on the same data directory, drained and checked, for several rounds; the
// same with a power cut after each kill (the data directory on
// internal/lazyfs, which drops unsynced data); failing fsyncs; and a full
// data volume (a small tmpfs).
//
// The package has no library code; everything is in its tests. It owns
// nothing of the broker and must not import the broker's packages: the
// child is built from ./cmd/busbar and reached only through AMQP and the
// management API, as a user reaches it. docs/durability.md states the
// guarantees the tests prove; docs/reliability.md has the figures.
//
// What the test checks after every restart, from a ledger of what the SDK
// acknowledged:
//
//   - every acknowledged send (single or batch) was either completed, with
//     an acknowledged completion, or is delivered again after the restart;
//   - nothing whose completion was acknowledged is ever delivered again, and
//     no scheduled message whose cancellation was acknowledged fires;
//   - every message locked but not settled at the crash is delivered again
//     at once (locks do not survive a restart), with a delivery count no
//     lower than the one it had already shown or had persisted by abandons;
//   - scheduled messages acknowledged before the crash fire after it, never
//     before their time;
//   - a session's state reads back as the last acknowledged value (or the
//     value whose set was in flight at the crash);
//   - a batch whose send was not acknowledged is all there or all absent;
//   - bodies and ids come back byte for byte; no message appears that no
//     producer sent.
//
// Run it with
//
//	go test ./crashtest/
//
// and the long campaign (100 rounds each of SIGKILL and of power loss) with
// scripts/crash-campaign.sh. BUSBAR_CRASHTEST_ROUNDS sets the number of
// rounds and BUSBAR_CRASHTEST_SEED repeats a run's random kill moments.
//
// BUSBAR_CRASHTEST_BINARY names a prebuilt busbar binary to test instead
// of building ./cmd/busbar (used to show that the test fails against a
// broker that acknowledges before its commit is on disk), and
// BUSBAR_CRASHTEST_VERBOSE copies the child's output to stderr.
package crashtest
