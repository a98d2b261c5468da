package benchcore

import (
	"encoding/binary"
	"errors"
	"time"
)

// HeaderSize is the number of bytes at the start of every message body that
// the engine uses for verification; a message is never smaller.
const HeaderSize = 32

const (
	magic0, magic1 = 'B', 'b'
	bodyVersion    = 1

	flagKeyed = 1 << 0 // the message belongs to an ordered key
	flagLast  = 1 << 1 // the last message of its key
)

// Header is what the engine embeds in a message body.
type Header struct {
	// Run identifies the run; messages of another run left in a queue are
	// recognised and ignored.
	Run uint32
	// ID is unique within the run and dense from 0.
	ID uint64
	// Keyed reports whether Key and Seq are meaningful.
	Keyed bool
	// Last marks the final message of its key.
	Last bool
	// Key is the ordering key's index, Seq the message's position in it.
	Key, Seq uint32
	// Intended is the intended send time as an offset from the run's epoch.
	Intended time.Duration
}

// errNotBench is returned by DecodeHeader for a body the engine did not write.
var errNotBench = errors.New("benchcore: body has no benchmark header")

// EncodeHeader writes h into the first HeaderSize bytes of b.
func EncodeHeader(b []byte, h Header) {
	_ = b[HeaderSize-1]
	b[0], b[1], b[2] = magic0, magic1, bodyVersion
	var f byte
	if h.Keyed {
		f |= flagKeyed
	}
	if h.Last {
		f |= flagLast
	}
	b[3] = f
	binary.BigEndian.PutUint32(b[4:], h.Run)
	binary.BigEndian.PutUint64(b[8:], h.ID)
	binary.BigEndian.PutUint64(b[16:], uint64(h.Intended))
	binary.BigEndian.PutUint32(b[24:], h.Key)
	binary.BigEndian.PutUint32(b[28:], h.Seq)
}

// DecodeHeader reads the header EncodeHeader wrote.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize || b[0] != magic0 || b[1] != magic1 || b[2] != bodyVersion {
		return Header{}, errNotBench
	}
	return Header{
		Keyed:    b[3]&flagKeyed != 0,
		Last:     b[3]&flagLast != 0,
		Run:      binary.BigEndian.Uint32(b[4:]),
		ID:       binary.BigEndian.Uint64(b[8:]),
		Intended: time.Duration(binary.BigEndian.Uint64(b[16:])),
		Key:      binary.BigEndian.Uint32(b[24:]),
		Seq:      binary.BigEndian.Uint32(b[28:]),
	}, nil
}
