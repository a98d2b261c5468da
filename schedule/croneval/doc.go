// Package croneval holds the evaluation of Go cron libraries against the
// hard cases of package schedule (clock changes in three zones, leap days,
// month ends, seconds, macros). It is a module of its own so that the
// libraries evaluated never enter Busbar's go.mod. Run it with
//
//	cd schedule/croneval && go test -v ./...
//
// The test prints one line per case and library and fails if a library's
// verdict changes, so a new release that fixes (or breaks) a case is
// noticed.
package croneval
