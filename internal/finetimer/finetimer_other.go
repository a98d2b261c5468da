//go:build !linux

package finetimer

import "time"

// sysTimer is a time.Timer where no timerfd exists.
type sysTimer struct {
	t *time.Timer
}

func (s *sysTimer) open(expired func()) { s.t = stoppedTimer(expired) }

func (s *sysTimer) arm(d time.Duration) { s.t.Reset(d) }

func (s *sysTimer) close() error {
	s.t.Stop()
	return nil
}
