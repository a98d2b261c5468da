package encoding

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// MaxDepth bounds how deeply compound and described values may nest.
const MaxDepth = 64

// Error is a decoding failure: what was wrong and at which byte offset of
// the decoder's input (counted from the start of the outermost buffer).
type Error struct {
	Offset int
	What   string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("amqp decode: %s at offset %d", e.What, e.Offset) }

// Decoder reads AMQP values from a byte slice. It never reads past the
// slice, checks every length against the bytes remaining before using it,
// and bounds nesting at MaxDepth. Scalar readers allocate nothing; ReadBinary
// and the *Bytes readers return slices aliasing the input.
//
// A Decoder is a small value; ReadList and ReadMap return a child Decoder
// over a compound's contents, and the parent moves past the whole compound.
// A typed reader that finds a value of another type returns an error and
// consumes nothing, so the caller may try another reader; after any other
// error the position is unspecified.
type Decoder struct {
	b     []byte
	off   int // position in b
	base  int // offset of b[0] in the outermost buffer, for errors
	depth int
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte) Decoder { return Decoder{b: b} }

// Reset makes d read b from its start.
func (d *Decoder) Reset(b []byte) { *d = Decoder{b: b} }

// Len returns the number of bytes left.
func (d *Decoder) Len() int { return len(d.b) - d.off }

// Offset returns the position of the next byte, counted from the start of
// the outermost buffer.
func (d *Decoder) Offset() int { return d.base + d.off }

// Pos returns the position of the next byte within this decoder's slice.
func (d *Decoder) Pos() int { return d.off }

// Rest returns the unread bytes (aliasing the input).
func (d *Decoder) Rest() []byte { return d.b[d.off:] }

func (d *Decoder) errf(at int, format string, args ...any) error {
	return &Error{Offset: d.base + at, What: fmt.Sprintf(format, args...)}
}

func (d *Decoder) short(at int, what string, need int) error {
	return d.errf(at, "%s needs %d bytes, %d left", what, need, len(d.b)-at)
}

// Peek returns the next format code without consuming it.
func (d *Decoder) Peek() (byte, error) {
	if d.off >= len(d.b) {
		return 0, d.errf(d.off, "unexpected end of input")
	}
	return d.b[d.off], nil
}

// ReadNull consumes a null and reports true if the next value is null;
// otherwise it consumes nothing and reports false.
func (d *Decoder) ReadNull() bool {
	if d.off < len(d.b) && d.b[d.off] == CodeNull {
		d.off++
		return true
	}
	return false
}

// IsDescribed reports whether the next value is a described value.
func (d *Decoder) IsDescribed() bool { return d.off < len(d.b) && d.b[d.off] == CodeDescribed }

// take consumes n value bytes.
func (d *Decoder) take(n int, what string) ([]byte, error) {
	if n > len(d.b)-d.off {
		return nil, d.short(d.off, what, n)
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v, nil
}

// readCode consumes a format code.
func (d *Decoder) readCode() (byte, int, error) {
	if d.off >= len(d.b) {
		return 0, d.off, d.errf(d.off, "unexpected end of input")
	}
	c := d.b[d.off]
	d.off++
	return c, d.off - 1, nil
}

func (d *Decoder) typeErr(at int, code byte, want string) error {
	return d.errf(at, "expected %s, found %s (0x%02x)", want, codeName(code), code)
}

// readUnsigned reads any unsigned integer encoding.
func (d *Decoder) readUnsigned(want string) (uint64, error) {
	code, at, err := d.readCode()
	if err != nil {
		return 0, err
	}
	var b []byte
	switch code {
	case CodeUint0, CodeUlong0:
		return 0, nil
	case CodeUbyte, CodeSmallUint, CodeSmallUlong:
		if b, err = d.take(1, want); err != nil {
			return 0, err
		}
		return uint64(b[0]), nil
	case CodeUshort:
		if b, err = d.take(2, want); err != nil {
			return 0, err
		}
		return uint64(binary.BigEndian.Uint16(b)), nil
	case CodeUint:
		if b, err = d.take(4, want); err != nil {
			return 0, err
		}
		return uint64(binary.BigEndian.Uint32(b)), nil
	case CodeUlong:
		if b, err = d.take(8, want); err != nil {
			return 0, err
		}
		return binary.BigEndian.Uint64(b), nil
	}
	d.off = at
	return 0, d.typeErr(at, code, want)
}

func (d *Decoder) readUnsignedMax(want string, limit uint64) (uint64, error) {
	at := d.off
	v, err := d.readUnsigned(want)
	if err == nil && v > limit {
		return 0, d.errf(at, "%s value %d out of range", want, v)
	}
	return v, err
}

// ReadUint8 reads a ubyte (or any unsigned encoding whose value fits).
func (d *Decoder) ReadUint8() (uint8, error) {
	v, err := d.readUnsignedMax("ubyte", math.MaxUint8)
	return uint8(v), err
}

// ReadUint16 reads a ushort (or any unsigned encoding whose value fits).
func (d *Decoder) ReadUint16() (uint16, error) {
	v, err := d.readUnsignedMax("ushort", math.MaxUint16)
	return uint16(v), err
}

// ReadUint32 reads a uint in any of its encodings (or a narrower unsigned
// type, or a ulong whose value fits).
func (d *Decoder) ReadUint32() (uint32, error) {
	// Fast path for the three uint encodings.
	if rest := d.b[d.off:]; len(rest) > 0 {
		switch rest[0] {
		case CodeUint0:
			d.off++
			return 0, nil
		case CodeSmallUint:
			if len(rest) >= 2 {
				d.off += 2
				return uint32(rest[1]), nil
			}
		case CodeUint:
			if len(rest) >= 5 {
				d.off += 5
				return binary.BigEndian.Uint32(rest[1:]), nil
			}
		}
	}
	v, err := d.readUnsignedMax("uint", math.MaxUint32)
	return uint32(v), err
}

// ReadUint64 reads a ulong in any of its encodings, or a narrower unsigned type.
func (d *Decoder) ReadUint64() (uint64, error) { return d.readUnsigned("ulong") }

// ReadInt64 reads any signed integer encoding (byte, short, int, long).
func (d *Decoder) ReadInt64() (int64, error) {
	code, at, err := d.readCode()
	if err != nil {
		return 0, err
	}
	var b []byte
	switch code {
	case CodeByte, CodeSmallInt, CodeSmallLong:
		if b, err = d.take(1, "long"); err != nil {
			return 0, err
		}
		return int64(int8(b[0])), nil
	case CodeShort:
		if b, err = d.take(2, "long"); err != nil {
			return 0, err
		}
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case CodeInt:
		if b, err = d.take(4, "long"); err != nil {
			return 0, err
		}
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case CodeLong:
		if b, err = d.take(8, "long"); err != nil {
			return 0, err
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	}
	d.off = at
	return 0, d.typeErr(at, code, "signed integer")
}

// ReadInt32 reads an int (or a narrower signed type, or a long whose value fits).
func (d *Decoder) ReadInt32() (int32, error) {
	at := d.off
	v, err := d.ReadInt64()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		return 0, d.errf(at, "int value %d out of range", v)
	}
	return int32(v), err
}

// ReadBool reads a boolean in any of its encodings.
func (d *Decoder) ReadBool() (bool, error) {
	if d.off < len(d.b) {
		switch d.b[d.off] {
		case CodeTrue:
			d.off++
			return true, nil
		case CodeFalse:
			d.off++
			return false, nil
		}
	}
	code, at, err := d.readCode()
	if err != nil {
		return false, err
	}
	switch code {
	case CodeTrue:
		return true, nil
	case CodeFalse:
		return false, nil
	case CodeBool:
		b, err := d.take(1, "boolean")
		if err != nil {
			return false, err
		}
		switch b[0] {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
		return false, d.errf(at+1, "boolean byte 0x%02x is neither 0 nor 1", b[0])
	}
	d.off = at
	return false, d.typeErr(at, code, "boolean")
}

// ReadTimestampMillis reads a timestamp as milliseconds since the Unix epoch.
func (d *Decoder) ReadTimestampMillis() (int64, error) {
	code, at, err := d.readCode()
	if err != nil {
		return 0, err
	}
	if code != CodeTimestamp {
		d.off = at
		return 0, d.typeErr(at, code, "timestamp")
	}
	b, err := d.take(8, "timestamp")
	if err != nil {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// ReadTimestamp reads a timestamp as a UTC time.Time.
func (d *Decoder) ReadTimestamp() (time.Time, error) {
	ms, err := d.ReadTimestampMillis()
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(ms).UTC(), nil
}

// ReadUUID reads a uuid.
func (d *Decoder) ReadUUID() (UUID, error) {
	var u UUID
	code, at, err := d.readCode()
	if err != nil {
		return u, err
	}
	if code != CodeUUID {
		d.off = at
		return u, d.typeErr(at, code, "uuid")
	}
	b, err := d.take(16, "uuid")
	if err != nil {
		return u, err
	}
	copy(u[:], b)
	return u, nil
}

// readVar reads a variable-width value of the given 8/32-bit codes.
func (d *Decoder) readVar(code8, code32 byte, want string) ([]byte, error) {
	code, at, err := d.readCode()
	if err != nil {
		return nil, err
	}
	if code != code8 && code != code32 {
		d.off = at
		return nil, d.typeErr(at, code, want)
	}
	n, err := d.readSize(at, code == code32, want)
	if err != nil {
		return nil, err
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v, nil
}

// ReadBinary reads binary; the result aliases the input.
func (d *Decoder) ReadBinary() ([]byte, error) { return d.readVar(CodeVbin8, CodeVbin32, "binary") }

// ReadStringBytes reads a string's UTF-8 bytes, aliasing the input.
func (d *Decoder) ReadStringBytes() ([]byte, error) { return d.readVar(CodeStr8, CodeStr32, "string") }

// ReadString reads a string.
func (d *Decoder) ReadString() (string, error) {
	b, err := d.ReadStringBytes()
	return string(b), err
}

// ReadSymbolBytes reads a symbol's bytes, aliasing the input.
func (d *Decoder) ReadSymbolBytes() ([]byte, error) { return d.readVar(CodeSym8, CodeSym32, "symbol") }

// ReadSymbol reads a symbol.
func (d *Decoder) ReadSymbol() (Symbol, error) {
	b, err := d.ReadSymbolBytes()
	return Symbol(b), err
}

// readCompoundHeader reads the size and count of a list, map or array whose
// constructor at 'at' is code; it returns the count and the byte span of the
// contents after the count, and moves d past the whole compound.
func (d *Decoder) readCompoundHeader(at int, code byte, wide bool, want string) (count int, body []byte, err error) {
	var size, cnt uint64
	if wide {
		if len(d.b)-d.off < 8 {
			return 0, nil, d.short(d.off, want+" header", 8)
		}
		size = uint64(binary.BigEndian.Uint32(d.b[d.off:]))
		cnt = uint64(binary.BigEndian.Uint32(d.b[d.off+4:]))
		d.off += 4
		if size < 4 {
			return 0, nil, d.errf(at, "%s size %d is smaller than its count field", want, size)
		}
		size -= 4
	} else {
		if len(d.b)-d.off < 2 {
			return 0, nil, d.short(d.off, want+" header", 2)
		}
		size = uint64(d.b[d.off])
		cnt = uint64(d.b[d.off+1])
		d.off++
		if size < 1 {
			return 0, nil, d.errf(at, "%s size %d is smaller than its count field", want, size)
		}
		size--
	}
	cntLen := 1
	if wide {
		cntLen = 4
	}
	if size > uint64(len(d.b)-d.off-cntLen) {
		return 0, nil, d.errf(at, "%s of %d bytes exceeds the %d bytes left", want, size, len(d.b)-d.off-cntLen)
	}
	d.off += cntLen
	body = d.b[d.off : d.off+int(size) : d.off+int(size)]
	// Every element takes at least one byte, except in arrays of zero-width
	// elements; those are bounded by the input size by the caller.
	if code != CodeArray8 && code != CodeArray32 && cnt > size {
		return 0, nil, d.errf(at, "%s claims %d elements in %d bytes", want, cnt, size)
	}
	d.off += int(size)
	return int(cnt), body, nil
}

func (d *Decoder) child(body []byte) (Decoder, error) {
	if d.depth >= MaxDepth {
		return Decoder{}, d.errf(d.off, "nesting deeper than %d", MaxDepth)
	}
	start := d.off - len(body) // body ends at d.off
	return Decoder{b: body, base: d.base + start, depth: d.depth + 1}, nil
}

// ReadList reads a list header (list0, list8 or list32) and returns a
// decoder over its elements and their count; d moves past the whole list.
func (d *Decoder) ReadList() (Decoder, int, error) {
	code, at, err := d.readCode()
	if err != nil {
		return Decoder{}, 0, err
	}
	var count int
	var body []byte
	switch code {
	case CodeList0:
		body = d.b[d.off:d.off:d.off]
	case CodeList8, CodeList32:
		if count, body, err = d.readCompoundHeader(at, code, code == CodeList32, "list"); err != nil {
			return Decoder{}, 0, err
		}
	default:
		d.off = at
		return Decoder{}, 0, d.typeErr(at, code, "list")
	}
	c, err := d.child(body)
	return c, count, err
}

// ReadMap reads a map header and returns a decoder over its keys and values
// and the number of entries (pairs); d moves past the whole map.
func (d *Decoder) ReadMap() (Decoder, int, error) {
	code, at, err := d.readCode()
	if err != nil {
		return Decoder{}, 0, err
	}
	if code != CodeMap8 && code != CodeMap32 {
		d.off = at
		return Decoder{}, 0, d.typeErr(at, code, "map")
	}
	count, body, err := d.readCompoundHeader(at, code, code == CodeMap32, "map")
	if err != nil {
		return Decoder{}, 0, err
	}
	if count%2 != 0 {
		return Decoder{}, 0, d.errf(at, "map has an odd number of elements (%d)", count)
	}
	c, err := d.child(body)
	return c, count / 2, err
}

// ReadDescriptor reads the start of a described value: the 0x00 constructor
// and the descriptor. A numeric descriptor is returned as code with sym nil;
// a symbolic one as sym (aliasing the input). The described value follows.
func (d *Decoder) ReadDescriptor() (code uint64, sym []byte, err error) {
	c, at, err := d.readCode()
	if err != nil {
		return 0, nil, err
	}
	if c != CodeDescribed {
		d.off = at
		return 0, nil, d.typeErr(at, c, "described type")
	}
	next, err := d.Peek()
	if err != nil {
		return 0, nil, err
	}
	if next == CodeSym8 || next == CodeSym32 {
		sym, err = d.ReadSymbolBytes()
		return 0, sym, err
	}
	code, err = d.ReadUint64()
	if err != nil {
		return 0, nil, d.errf(d.off, "descriptor is neither ulong nor symbol: %v", err)
	}
	return code, nil, nil
}
