//go:build race

package saga_test

// raceEnabled: the race detector slows the broker and the SDK several
// times over, so the scale test runs fewer sagas under it.
const raceEnabled = true
