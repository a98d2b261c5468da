package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"
)

// Key layout. Every key starts with a one-byte kind; entity ids and sequence
// numbers are 8-byte big-endian so that keys sort numerically.
//
//	'N'                       → namespace record (next entity id)
//	'E' eid                   → entity record
//	'R' subID foldedRuleName  → rule record
//	'C' eid                   → sequence-number high-water mark
//	'M' eid subqueue seq      → message index record (place, state, counts, times)
//	'B' eid bodyRef           → message record: headers, application properties
//	                            and the body (the client's encoded bytes)
//
// A message keeps its bodyRef (the sequence number it was first stored
// under) for life; its index record moves when its subqueue or sequence
// number changes (dead-lettering, scheduled activation), and is rewritten
// from memory on every state change without reading the message back.
//
//	'D' eid messageID         → duplicate-detection entry (enqueued time)
//	'S' eid sessionID         → session state
const (
	kNamespace = 'N'
	kEntity    = 'E'
	kRule      = 'R'
	kCounter   = 'C'
	kMessage   = 'M'
	kBody      = 'B'
	kDedupe    = 'D'
	kSession   = 'S'
)

func key1(kind byte, id uint64) []byte {
	k := make([]byte, 9)
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// Lengths of the keys key2 and msgKey make.
const (
	key2Len   = 17
	msgKeyLen = 18
)

func key2(kind byte, id, n uint64) []byte { return putKey2(make([]byte, key2Len), kind, id, n) }

func putKey2(k []byte, kind byte, id, n uint64) []byte {
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], id)
	binary.BigEndian.PutUint64(k[9:], n)
	return k
}

// msgKey is the key of a message's index record: per subqueue, so that a
// dead-letter peek reads only dead letters.
func msgKey(id uint64, sub Subqueue, seq uint64) []byte {
	return putMsgKey(make([]byte, msgKeyLen), id, sub, seq)
}

func putMsgKey(k []byte, id uint64, sub Subqueue, seq uint64) []byte {
	k[0] = kMessage
	binary.BigEndian.PutUint64(k[1:], id)
	k[9] = byte(sub)
	binary.BigEndian.PutUint64(k[10:], seq)
	return k
}

func keyS(kind byte, id uint64, s string) []byte {
	k := make([]byte, 9, 9+len(s))
	k[0] = kind
	binary.BigEndian.PutUint64(k[1:], id)
	return append(k, s...)
}

// prefixRange returns [start, end) covering every key of kind for entity id.
func prefixRange(kind byte, id uint64) ([]byte, []byte) {
	return key1(kind, id), key1(kind, id+1)
}

// Record versions.
const (
	entityRecordV1   = 1
	entityRecordV2   = 2 // V1 + a queue's or topic's authorization rules, the forwarding URIs
	ruleRecordV1     = 1
	ruleRecordV2     = 2 // V1 + the action's parameters
	metaRecordV1     = 1
	metaRecordInline = 2 // V1, then the message record: one key for both (msgIdx.inline)
	messageRecordV1  = 1
)

var errCorrupt = errors.New("corrupt record")

type enc struct{ b []byte }

func (e *enc) u8(v uint8)          { e.b = append(e.b, v) }
func (e *enc) uv(v uint64)         { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) sv(v int64)          { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)        { e.uv(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(s []byte)      { e.uv(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) dur(d time.Duration) { e.sv(int64(d)) }
func (e *enc) boolean(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// time encodes any time.Time (years 1 to 9999 and beyond, as .NET clients
// send DateTime.MaxValue) as a presence byte, Unix seconds and nanoseconds.
func (e *enc) time(t time.Time) { e.b = appendTime(e.b, t) }

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = binary.AppendVarint(append(b, 1), t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *dec) u8() uint8 {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) uv() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) sv() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) raw() []byte {
	n := d.uv()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) str() string        { return string(d.raw()) }
func (d *dec) dur() time.Duration { return time.Duration(d.sv()) }
func (d *dec) boolean() bool {
	v := d.u8()
	if v > 1 {
		d.fail()
	}
	return v == 1
}
func (d *dec) time() time.Time {
	switch d.u8() {
	case 0:
		return time.Time{}
	case 1:
		sec, nsec := d.sv(), d.uv()
		if nsec >= 1e9 {
			d.fail()
			return time.Time{}
		}
		return time.Unix(sec, int64(nsec)).UTC()
	}
	d.fail()
	return time.Time{}
}

// Typed values (application properties, SQL parameters).
const (
	tNil = iota
	tFalse
	tTrue
	tString
	tBytes
	tInt8
	tInt16
	tInt32
	tInt64
	tUint8
	tUint16
	tUint32
	tUint64
	tFloat32
	tFloat64
	tTime
	tDuration
	tUUID
	tInt
	tUint
)

func (e *enc) value(v any) error {
	switch x := v.(type) {
	case nil:
		e.u8(tNil)
	case bool:
		if x {
			e.u8(tTrue)
		} else {
			e.u8(tFalse)
		}
	case string:
		e.u8(tString)
		e.str(x)
	case []byte:
		e.u8(tBytes)
		e.bytes(x)
	case int8:
		e.u8(tInt8)
		e.sv(int64(x))
	case int16:
		e.u8(tInt16)
		e.sv(int64(x))
	case int32:
		e.u8(tInt32)
		e.sv(int64(x))
	case int64:
		e.u8(tInt64)
		e.sv(x)
	case int:
		e.u8(tInt)
		e.sv(int64(x))
	case uint8:
		e.u8(tUint8)
		e.uv(uint64(x))
	case uint16:
		e.u8(tUint16)
		e.uv(uint64(x))
	case uint32:
		e.u8(tUint32)
		e.uv(uint64(x))
	case uint64:
		e.u8(tUint64)
		e.uv(x)
	case uint:
		e.u8(tUint)
		e.uv(uint64(x))
	case float32:
		e.u8(tFloat32)
		e.uv(uint64(math.Float32bits(x)))
	case float64:
		e.u8(tFloat64)
		e.uv(math.Float64bits(x))
	case time.Time:
		e.u8(tTime)
		e.time(x)
	case time.Duration:
		e.u8(tDuration)
		e.sv(int64(x))
	case [16]byte:
		e.u8(tUUID)
		e.b = append(e.b, x[:]...)
	default:
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Array && rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
			var u [16]byte
			reflect.Copy(reflect.ValueOf(&u).Elem(), rv)
			e.u8(tUUID)
			e.b = append(e.b, u[:]...)
			return nil
		}
		return fmt.Errorf("unsupported property value type %T", v)
	}
	return nil
}

func (d *dec) value() any {
	switch d.u8() {
	case tNil:
		return nil
	case tFalse:
		return false
	case tTrue:
		return true
	case tString:
		return d.str()
	case tBytes:
		return append([]byte{}, d.raw()...)
	case tInt8:
		return int8(d.sv())
	case tInt16:
		return int16(d.sv())
	case tInt32:
		return int32(d.sv())
	case tInt64:
		return d.sv()
	case tInt:
		return int(d.sv())
	case tUint8:
		return uint8(d.uv())
	case tUint16:
		return uint16(d.uv())
	case tUint32:
		return uint32(d.uv())
	case tUint64:
		return d.uv()
	case tUint:
		return uint(d.uv())
	case tFloat32:
		return math.Float32frombits(uint32(d.uv()))
	case tFloat64:
		return math.Float64frombits(d.uv())
	case tTime:
		return d.time()
	case tDuration:
		return time.Duration(d.sv())
	case tUUID:
		if len(d.b) < 16 {
			d.fail()
			return nil
		}
		var u [16]byte
		copy(u[:], d.b)
		d.b = d.b[16:]
		return u
	default:
		d.fail()
		return nil
	}
}

// valueMap encodes a map in key order (deterministic records).
func (e *enc) valueMap(m map[string]any) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uv(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		if err := e.value(m[k]); err != nil {
			return fmt.Errorf("property %q: %w", k, err)
		}
	}
	return nil
}

func (d *dec) valueMap() map[string]any {
	n := d.uv()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	m := make(map[string]any, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		k := d.str()
		m[k] = d.value()
	}
	return m
}

// checkValues reports an application property value the codec cannot store.
func checkValues(m map[string]any) error {
	if len(m) == 0 {
		return nil // most messages: nothing to encode, nothing to allocate
	}
	var e enc
	return e.valueMap(m)
}
