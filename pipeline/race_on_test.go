//go:build race

package pipeline_test

// raceEnabled: the race detector slows the broker and the SDK several
// times over, so the scale test runs fewer jobs under it by default.
const raceEnabled = true
