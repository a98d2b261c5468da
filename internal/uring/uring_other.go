//go:build !linux

package uring

// Syncer is unavailable outside Linux.
type Syncer struct{}

// New returns ErrUnavailable outside Linux.
func New() (*Syncer, error) { return nil, ErrUnavailable }

// Fdatasync is never called outside Linux: New fails.
func (s *Syncer) Fdatasync(fd uintptr) error { return ErrUnavailable }

// Close does nothing outside Linux.
func (s *Syncer) Close() error { return nil }
