// Package scaletest measures what a large backlog costs a `busbar serve`
// process: how long it takes to start on one, how much memory it holds
// while counting it and while receivers work through it, and that the
// messages come out complete and in order.
//
// The default run uses a backlog of 120,000 messages, past the broker's
// page window of 50,000, so that paging, the background count after a
// restart and page-ins while receiving are all exercised. The campaign the
// broker's targets are measured with sets BUSBAR_BACKLOG:
//
//	BUSBAR_BACKLOG=10000000 go test -timeout 60m -run TestBacklog -v ./scaletest
//
// The overload tests (overload_test.go) push the same child process with
// one kind of overload each — idle connections, a consumer that stops
// reading its socket, a flood of sends, a million sessions, backlogs on
// hundreds of queues — and measure its memory and a bystander's latency.
// Their default sizes are small; the campaign's command is in
// docs/reliability.md, section 4.
//
// The package owns no product code; it drives a child process built from
// ./cmd/busbar (internal/serveproc) and reads its memory from /proc.
package scaletest
