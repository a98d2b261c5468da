package consistent

import (
	"context"
	"errors"
	"time"
)

// Session is what a store may use of the session an input arrived on;
// *processor.Session implements it.
type Session interface {
	ID() string
	State(ctx context.Context) ([]byte, error)
	SetState(ctx context.Context, state []byte) error
}

// Key names one state stream: the business id, and the session the input
// arrived on (nil without sessions). Stores that keep the stream in the
// session state need Session; the others use ID only.
type Key struct {
	ID      string
	Session Session
}

// Version is one version of a state stream.
type Version struct {
	Number    int64     // 1 for the first version of a stream, then +1 each
	MessageID string    // the MessageId of the input that produced it
	Context   []byte    // the captured context of that input, a JSON object
	State     []byte    // the state after the input, a JSON value
	Stored    time.Time // when it was stored
}

// Loaded is what Store.Load finds for one input.
type Loaded struct {
	// Latest is the newest version; its Number is 0 when the stream is
	// empty.
	Latest Version
	// Match is the version the input's MessageId produced, or nil when the
	// input is new.
	Match *Version
	// Base is the version before Match, or nil when Match is the first
	// version or Base was removed by retention.
	Base *Version
}

// ErrConflict is returned by Store.Append when the stream's newest version
// is not the one the caller loaded, or the input's MessageId is already in
// the stream: another host got there first.
var ErrConflict = errors.New("consistent: the state stream was changed concurrently")

// Store keeps state streams. Implementations must be safe for concurrent
// use; every one passes the suite in package consistenttest.
type Store interface {
	// Load returns the newest version of key's stream and, when messageID
	// produced a version still kept, that version and the one before it.
	Load(ctx context.Context, key Key, messageID string) (Loaded, error)
	// Append stores v as the newest version of key's stream. It returns
	// ErrConflict (and stores nothing) unless the newest stored version is
	// v.Number-1 (none for v.Number 1) and v.MessageID is not in the stream.
	// It may remove versions that its Retention no longer keeps.
	Append(ctx context.Context, key Key, v Version) error
}

// Retention says which versions of a stream a store keeps. The newest
// version is always kept. An older version is removed once it is older than
// MaxAge or more than MaxVersions versions behind the newest; the version
// just before the oldest one kept stays too, as the state a duplicate of that
// oldest one is replayed against. A duplicate is thus recognised and replayed
// exactly while the version it produced is younger than MaxAge and among the
// newest MaxVersions. A duplicate older than that is not recognised: choose
// a window longer than the input's redelivery can take (lock duration times
// max delivery count) and than the senders' re-send window.
type Retention struct {
	MaxVersions int           // default 100; 1 keeps only the newest
	MaxAge      time.Duration // default 7 days; negative: no age limit
}

// DefaultRetention is Retention's defaults.
var DefaultRetention = Retention{MaxVersions: 100, MaxAge: 7 * 24 * time.Hour}

// WithDefaults returns r with zero fields replaced by DefaultRetention's.
func (r Retention) WithDefaults() Retention {
	if r.MaxVersions <= 0 {
		r.MaxVersions = DefaultRetention.MaxVersions
	}
	if r.MaxAge == 0 {
		r.MaxAge = DefaultRetention.MaxAge
	}
	return r
}

// OldestKept returns the number of the oldest version r keeps in a stream
// whose newest version is newest, at time now; stored(n) reports when
// version n was stored. Versions below OldestKept-1 may be removed
// (OldestKept-1 is kept as the replay base). A version older than MaxAge
// removes every version before it too.
func (r Retention) OldestKept(newest int64, now time.Time, stored func(n int64) time.Time) int64 {
	r = r.WithDefaults()
	low := max(newest-int64(r.MaxVersions)+1, 1)
	if r.MaxAge < 0 {
		return low
	}
	cut := now.Add(-r.MaxAge)
	oldest := newest
	for oldest > low && !stored(oldest-1).Before(cut) {
		oldest--
	}
	return oldest
}

// Cutoff is the time before which r's MaxAge removes versions, at time now
// (the zero time when r has no age limit).
func (r Retention) Cutoff(now time.Time) time.Time {
	r = r.WithDefaults()
	if r.MaxAge < 0 {
		return time.Time{}
	}
	return now.Add(-r.MaxAge)
}
