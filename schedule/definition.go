package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Definition is a schedule: its name, when it fires, what it sends and
// what happens when firings are missed or overlap.
type Definition struct {
	// Name identifies the schedule (1 to 128 characters); it is the
	// session id of the schedule in the control queue.
	Name string `json:"name"`
	// Spec is when the schedule fires.
	Spec
	// Target is the queue or topic each firing is sent to. It should have
	// duplicate detection on: a host that crashes after sending a firing
	// and before recording it sends it again with the same MessageId.
	Target string `json:"target"`
	// Message is what each firing carries.
	Message Message `json:"message,omitzero"`
	// Misfire decides what happens to firings that came due while no host
	// ran (default MisfireOnce).
	Misfire MisfirePolicy `json:"misfire,omitempty"`
	// MisfireLimit bounds MisfireAll (default 10).
	MisfireLimit int `json:"misfireLimit,omitempty"`
	// MisfireThreshold is how late a firing may be handled and still be on
	// time (default 1 minute). It is the only place a host's clock is
	// compared with a firing time; keep it well above any clock drift.
	MisfireThreshold Duration `json:"misfireThreshold,omitempty"`
	// Overlap decides what happens when a firing comes due while the work
	// of an earlier one is still running (default OverlapAllow). Skip and
	// queue need the worker to report each firing done (Scheduler.Done or
	// DoneAfter).
	Overlap OverlapPolicy `json:"overlap,omitempty"`
	// MaxRunTime is how long a firing counts as running without reporting
	// done (default 1 hour), for OverlapSkip and OverlapQueue.
	MaxRunTime Duration `json:"maxRunTime,omitempty"`
	// QueueLimit bounds the firings OverlapQueue holds back (default 10).
	QueueLimit int `json:"queueLimit,omitempty"`
}

// Message is the content of a fired message.
type Message struct {
	Subject     string         `json:"subject,omitempty"`
	ContentType string         `json:"contentType,omitempty"`
	Body        []byte         `json:"body,omitempty"`
	SessionID   string         `json:"sessionId,omitempty"`
	Properties  map[string]any `json:"properties,omitempty"`
}

// MisfirePolicy is what a host does with firings that came due while no
// host ran.
type MisfirePolicy string

// The misfire policies.
const (
	// MisfireOnce fires the first missed firing, late, and skips the
	// rest.
	MisfireOnce MisfirePolicy = "once"
	// MisfireAll fires every missed firing, late, up to MisfireLimit, and
	// skips the rest.
	MisfireAll MisfirePolicy = "all"
	// MisfireSkip fires none of the missed firings.
	MisfireSkip MisfirePolicy = "skip"
)

// OverlapPolicy is what a host does with a firing that comes due while an
// earlier one is still running.
type OverlapPolicy string

// The overlap policies.
const (
	// OverlapAllow fires regardless.
	OverlapAllow OverlapPolicy = "allow"
	// OverlapSkip drops the firing.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapQueue holds the firing back and fires it when the running
	// one reports done.
	OverlapQueue OverlapPolicy = "queue"
)

// withDefaults returns d with its zero values replaced by the defaults.
func (d Definition) withDefaults() Definition {
	if d.Misfire == "" {
		d.Misfire = MisfireOnce
	}
	if d.MisfireLimit == 0 {
		d.MisfireLimit = 10
	}
	if d.MisfireThreshold == 0 {
		d.MisfireThreshold = Duration(time.Minute)
	}
	if d.Overlap == "" {
		d.Overlap = OverlapAllow
	}
	if d.MaxRunTime == 0 {
		d.MaxRunTime = Duration(time.Hour)
	}
	if d.QueueLimit == 0 {
		d.QueueLimit = 10
	}
	return d
}

// MaxNameLength is the longest schedule name: a session id's limit.
const MaxNameLength = 128

// validate checks d and compiles its spec.
func (d Definition) validate(created time.Time) (*Times, error) {
	switch {
	case d.Name == "" || len(d.Name) > MaxNameLength || !utf8.ValidString(d.Name):
		return nil, fmt.Errorf("schedule: name %q must be 1 to %d bytes of UTF-8", d.Name, MaxNameLength)
	case d.Target == "":
		return nil, fmt.Errorf("schedule %s: a target queue or topic is needed", d.Name)
	}
	switch d.Misfire {
	case "", MisfireOnce, MisfireAll, MisfireSkip:
	default:
		return nil, fmt.Errorf("schedule %s: misfire policy %q is not once, all or skip", d.Name, d.Misfire)
	}
	switch d.Overlap {
	case "", OverlapAllow, OverlapSkip, OverlapQueue:
	default:
		return nil, fmt.Errorf("schedule %s: overlap policy %q is not allow, skip or queue", d.Name, d.Overlap)
	}
	if d.MisfireLimit < 0 || d.MisfireThreshold < 0 || d.MaxRunTime < 0 || d.QueueLimit < 0 {
		return nil, fmt.Errorf("schedule %s: limits and durations must not be negative", d.Name)
	}
	t, err := d.Spec.Compile(created)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", d.Name, err)
	}
	return t, nil
}

// Validate checks the definition as Put would.
func (d Definition) Validate() error {
	_, err := d.validate(time.Now())
	return err
}

// SameDefinition reports whether a and b define the same schedule (Put of
// b over a would change nothing).
func SameDefinition(a, b Definition) bool { return a.hash() == b.hash() }

// hash identifies the definition's content: re-registering a definition
// with the same hash changes nothing.
func (d Definition) hash() string {
	b, _ := json.Marshal(d.withDefaults())
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// ErrNotFound is returned for a schedule that does not exist.
var ErrNotFound = errors.New("schedule: not found")

// state is a schedule as kept in its session state.
type state struct {
	Format     int        `json:"format"` // 1
	Def        Definition `json:"definition"`
	Hash       string     `json:"hash"`
	Generation int64      `json:"generation"` // bumped whenever the pending tick is replaced
	Created    time.Time  `json:"created"`
	Updated    time.Time  `json:"updated"`
	Paused     bool       `json:"paused,omitempty"`
	Finished   bool       `json:"finished,omitempty"`
	// Next is the nominal time of the pending tick; TickSeq its sequence
	// number in the control queue (zero: none pending).
	Next      time.Time   `json:"next,omitzero"`
	TickSeq   int64       `json:"tickSeq,omitempty"`
	LastFired time.Time   `json:"lastFired,omitzero"`
	Firings   int         `json:"firings"`
	Triggered int         `json:"triggered,omitempty"`
	Missed    int64       `json:"missed,omitempty"`
	Skipped   int64       `json:"overlapSkipped,omitempty"`
	Running   []time.Time `json:"running,omitempty"`
	Queued    []time.Time `json:"queued,omitempty"`
}

const stateFormat = 1

func decodeState(b []byte) (*state, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("schedule: decoding session state: %w", err)
	}
	if st.Format != stateFormat {
		return nil, fmt.Errorf("schedule: session state format %d is not %d", st.Format, stateFormat)
	}
	return &st, nil
}

// Info is a schedule as List and Get report it.
type Info struct {
	Definition Definition  `json:"definition"`
	Generation int64       `json:"generation"`
	Created    time.Time   `json:"created"`
	Updated    time.Time   `json:"updated"`
	Paused     bool        `json:"paused"`
	Finished   bool        `json:"finished"`
	Next       time.Time   `json:"next,omitzero"`    // the next nominal firing; zero when paused or finished
	NextDue    time.Time   `json:"nextDue,omitzero"` // when its wake-up is due: Next plus the jitter
	LastFired  time.Time   `json:"lastFired,omitzero"`
	Firings    int         `json:"firings"`        // scheduled firings sent
	Triggered  int         `json:"triggered"`      // firings sent by Trigger
	Missed     int64       `json:"missed"`         // firings not sent because of the misfire policy
	Skipped    int64       `json:"overlapSkipped"` // firings not sent because of the overlap policy
	Running    []time.Time `json:"running,omitempty"`
	Queued     []time.Time `json:"queued,omitempty"`
}

func (st *state) info() Info {
	return Info{Definition: st.Def, Generation: st.Generation, Created: st.Created, Updated: st.Updated,
		Paused: st.Paused, Finished: st.Finished, Next: st.Next, NextDue: st.due(), LastFired: st.LastFired, Firings: st.Firings,
		Triggered: st.Triggered, Missed: st.Missed, Skipped: st.Skipped, Running: st.Running, Queued: st.Queued}
}

// due returns when the wake-up for st.Next is due.
func (st *state) due() time.Time {
	if st.Next.IsZero() {
		return time.Time{}
	}
	return st.Next.Add(jitter(st.Def.Name, st.Next, st.Def.Jitter))
}
