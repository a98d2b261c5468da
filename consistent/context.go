package consistent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"time"
)

// Captured is the part of a handler's environment that is captured when an
// input is first handled and replayed for its duplicates.
type Captured struct {
	Now  time.Time `json:"now"`  // what Context.Now returns
	Seed uint64    `json:"seed"` // seeds Context.Random and Context.NewID
}

// newCaptured captures now (in UTC, to the microsecond, so that it survives
// any store) and a random seed.
func newCaptured(now time.Time) (Captured, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Captured{}, err
	}
	return Captured{Now: now.UTC().Truncate(time.Microsecond), Seed: binary.LittleEndian.Uint64(b[:])}, nil
}

func (c Captured) encode() []byte {
	b, _ := json.Marshal(c) // cannot fail: a time and an integer
	return b
}

func decodeCaptured(b []byte) (Captured, error) {
	var c Captured
	if err := json.Unmarshal(b, &c); err != nil {
		return Captured{}, fmt.Errorf("consistent: stored context: %w", err)
	}
	return c, nil
}

// Context is what a handler may depend on besides its state and the input:
// everything in it is the same when a duplicate of the input is handled.
type Context struct {
	ctx       context.Context
	messageID string
	duplicate bool
	captured  Captured
	random    *mrand.Rand
	ids       *mrand.Rand
}

func newContext(ctx context.Context, messageID string, c Captured, duplicate bool) *Context {
	return &Context{
		ctx: ctx, messageID: messageID, captured: c, duplicate: duplicate,
		random: mrand.New(mrand.NewPCG(c.Seed, 0x9e3779b97f4a7c15)),
		ids:    mrand.New(mrand.NewPCG(c.Seed, 0xd1b54a32d192ed03)),
	}
}

// Context returns the context.Context of the call: cancelled when the
// message lock is lost or the host stops. Use it for I/O only; what the
// handler computes must not depend on it.
func (c *Context) Context() context.Context { return c.ctx }

// MessageID returns the input's MessageId.
func (c *Context) MessageID() string { return c.messageID }

// Duplicate reports whether the input was handled before and this run
// replays it. A handler does not need it; it is for logging.
func (c *Context) Duplicate() bool { return c.duplicate }

// Now returns the time the input was first handled, the same on every
// replay.
func (c *Context) Now() time.Time { return c.captured.Now }

// Random returns a random source seeded when the input was first handled:
// a replay draws the same numbers in the same order.
func (c *Context) Random() *mrand.Rand { return c.random }

// NewID returns a new UUID-formatted id; the n-th call of a replay returns
// the id of the n-th call of the first run.
func (c *Context) NewID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], c.ids.Uint64())
	binary.BigEndian.PutUint64(b[8:], c.ids.Uint64())
	return uuid(b)
}

// OutputID is the MessageId the Runner gives the index-th output (from 0)
// of the input with MessageId messageID when the handler left it empty.
func OutputID(messageID string, index int) string {
	h := sha256.New()
	h.Write([]byte(messageID))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(index))
	h.Write(n[:])
	var b [16]byte
	copy(b[:], h.Sum(nil))
	return uuid(b)
}

// uuid formats b as a version 4, variant 1 UUID string.
func uuid(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
