//go:build race

package main

// raceEnabled shrinks the largest tests under the race detector, which
// slows the broker and the SDK several times over.
const raceEnabled = true
