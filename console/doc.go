// Package console serves Busbar's web console: a browser UI for a
// namespace in the manner of Service Bus Explorer, under /ui/ on the HTTP
// listener, and the small JSON API under /ui/api/ that the UI calls.
//
// It owns the console's sign-in sessions, its per-entity samples of the last
// hour (an in-memory ring), the long-running dead-letter jobs (resubmit,
// purge) with their progress and reports, and the embedded assets
// (hand-written ES modules and CSS, no build step). Every operation calls the
// broker's public API, the same operations the management API and the
// Service Bus AMQP nodes call, and is authorized with the signed-in key's
// rights: Listen to view, peek and receive, Send to send and cancel scheduled
// messages, Manage for everything else.
//
// Sign-in exchanges a connection string (or a key name and key) for a
// server-side session: the console keeps a SAS token signed with the key,
// never the key, and the browser holds only an HttpOnly, SameSite=Strict
// cookie naming the session. Every request that changes something must also
// carry the session's CSRF token in a header. An API client may instead send
// a SharedAccessSignature token in the Authorization header.
//
// It sits at the level of the management API (package admin): it imports
// the broker, sas and the AMQP message encoding; only package server
// imports it.
package console
