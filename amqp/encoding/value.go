package encoding

import (
	"encoding/binary"
	"math"
	"time"
)

// ReadValue reads any value into its Go representation (see types.go).
// Binary values are copied, so the result does not alias the input.
func (d *Decoder) ReadValue() (any, error) {
	code, at, err := d.readCode()
	if err != nil {
		return nil, err
	}
	if code == CodeDescribed {
		return d.readDescribedAfterCode(at)
	}
	return d.readBody(at, code)
}

// readDescribedAfterCode reads descriptor and value after a 0x00 at 'at'.
func (d *Decoder) readDescribedAfterCode(at int) (any, error) {
	if d.depth >= MaxDepth {
		return nil, d.errf(at, "nesting deeper than %d", MaxDepth)
	}
	d.depth++
	defer func() { d.depth-- }()
	desc, err := d.ReadValue()
	if err != nil {
		return nil, err
	}
	if !validDescriptor(desc) {
		return nil, d.errf(at+1, "descriptor is %T, want ulong or symbol", desc)
	}
	v, err := d.ReadValue()
	if err != nil {
		return nil, err
	}
	return &Described{Descriptor: desc, Value: v}, nil
}

func validDescriptor(v any) bool {
	switch v.(type) {
	case uint64, Symbol:
		return true
	}
	return false
}

// readBody reads the body of a value whose constructor code (at 'at') has
// been consumed, or is implied by an enclosing array.
func (d *Decoder) readBody(at int, code byte) (any, error) {
	if w := fixedWidth(code); w >= 0 {
		b, err := d.take(w, codeName(code))
		if err != nil {
			return nil, err
		}
		return fixedValue(code, b), nil
	}
	switch code {
	case CodeVbin8, CodeStr8, CodeSym8, CodeVbin32, CodeStr32, CodeSym32:
		n, err := d.readSize(at, code&0xf0 == 0xb0, codeName(code))
		if err != nil {
			return nil, err
		}
		b := d.b[d.off : d.off+n]
		d.off += n
		switch code {
		case CodeVbin8, CodeVbin32:
			return append([]byte{}, b...), nil
		case CodeStr8, CodeStr32:
			return string(b), nil
		}
		return Symbol(b), nil
	case CodeList8, CodeList32:
		count, body, err := d.readCompoundHeader(at, code, code == CodeList32, "list")
		if err != nil {
			return nil, err
		}
		c, err := d.child(body)
		if err != nil {
			return nil, err
		}
		l := make(List, count)
		for i := range l {
			if l[i], err = c.ReadValue(); err != nil {
				return nil, err
			}
		}
		return l, c.expectEnd("list")
	case CodeMap8, CodeMap32:
		count, body, err := d.readCompoundHeader(at, code, code == CodeMap32, "map")
		if err != nil {
			return nil, err
		}
		if count%2 != 0 {
			return nil, d.errf(at, "map has an odd number of elements (%d)", count)
		}
		c, err := d.child(body)
		if err != nil {
			return nil, err
		}
		m := make(Map, count/2)
		for i := range m {
			if m[i].Key, err = c.ReadValue(); err != nil {
				return nil, err
			}
			if m[i].Value, err = c.ReadValue(); err != nil {
				return nil, err
			}
		}
		return m, c.expectEnd("map")
	case CodeArray8, CodeArray32:
		count, body, err := d.readCompoundHeader(at, code, code == CodeArray32, "array")
		if err != nil {
			return nil, err
		}
		c, err := d.child(body)
		if err != nil {
			return nil, err
		}
		return c.arrayContents(count)
	}
	return nil, d.errf(at, "unknown format code 0x%02x", code)
}

// arrayContents reads an array's element constructor and count elements
// from d, a child decoder over the array's contents.
func (d *Decoder) arrayContents(count int) (any, error) {
	var arr Array
	code, at, err := d.readCode()
	if err != nil {
		return nil, err
	}
	if code == CodeDescribed {
		if arr.Descriptor, err = d.ReadValue(); err != nil {
			return nil, err
		}
		if !validDescriptor(arr.Descriptor) {
			return nil, d.errf(at+1, "array descriptor is %T, want ulong or symbol", arr.Descriptor)
		}
		if code, at, err = d.readCode(); err != nil {
			return nil, err
		}
		if code == CodeDescribed {
			return nil, d.errf(at, "array element constructor nests a second descriptor")
		}
	}
	if codeName(code) == "unknown" {
		return nil, d.errf(at, "unknown array element format code 0x%02x", code)
	}
	arr.Code = code
	// Every element takes at least one byte, except zero-width ones (null,
	// true, false, uint0, ulong0, list0): bound those by the array's own
	// body size so that a forged count cannot force a huge allocation and
	// the bound does not depend on the 8- or 32-bit header chosen.
	limit := d.Len()
	if fixedWidth(code) == 0 {
		limit = len(d.b)
	}
	if count > limit {
		return nil, d.errf(at, "array claims %d elements in %d bytes", count, d.Len())
	}
	arr.Elems = make([]any, count)
	for i := range arr.Elems {
		v, err := d.readBody(at, code)
		if err != nil {
			return nil, err
		}
		if arr.Descriptor != nil {
			v = &Described{Descriptor: arr.Descriptor, Value: v}
		}
		arr.Elems[i] = v
	}
	return arr, d.expectEnd("array")
}

// expectEnd checks that a compound's contents were consumed exactly.
func (d *Decoder) expectEnd(what string) error {
	if d.off != len(d.b) {
		return d.errf(d.off, "%d bytes left over after the last %s element", len(d.b)-d.off, what)
	}
	return nil
}

// readSize reads an 8- or 32-bit size and checks it against the bytes left.
func (d *Decoder) readSize(at int, wide bool, want string) (int, error) {
	var n uint64
	if wide {
		if len(d.b)-d.off < 4 {
			return 0, d.short(d.off, want+" size", 4)
		}
		n = uint64(binary.BigEndian.Uint32(d.b[d.off:]))
		d.off += 4
	} else {
		if d.off >= len(d.b) {
			return 0, d.short(d.off, want+" size", 1)
		}
		n = uint64(d.b[d.off])
		d.off++
	}
	if n > uint64(len(d.b)-d.off) {
		return 0, d.errf(at, "%s of %d bytes exceeds the %d bytes left", want, n, len(d.b)-d.off)
	}
	return int(n), nil
}

func fixedValue(code byte, b []byte) any {
	switch code {
	case CodeTrue:
		return true
	case CodeFalse:
		return false
	case CodeBool:
		return b[0] != 0
	case CodeUint0:
		return uint32(0)
	case CodeUlong0:
		return uint64(0)
	case CodeList0:
		return List{}
	case CodeUbyte:
		return b[0]
	case CodeSmallUint:
		return uint32(b[0])
	case CodeSmallUlong:
		return uint64(b[0])
	case CodeByte:
		return int8(b[0])
	case CodeSmallInt:
		return int32(int8(b[0]))
	case CodeSmallLong:
		return int64(int8(b[0]))
	case CodeUshort:
		return binary.BigEndian.Uint16(b)
	case CodeShort:
		return int16(binary.BigEndian.Uint16(b))
	case CodeUint:
		return binary.BigEndian.Uint32(b)
	case CodeInt:
		return int32(binary.BigEndian.Uint32(b))
	case CodeFloat:
		return math.Float32frombits(binary.BigEndian.Uint32(b))
	case CodeDecimal32:
		return Decimal32(b)
	case CodeChar:
		return Char(binary.BigEndian.Uint32(b))
	case CodeUlong:
		return binary.BigEndian.Uint64(b)
	case CodeLong:
		return int64(binary.BigEndian.Uint64(b))
	case CodeDouble:
		return math.Float64frombits(binary.BigEndian.Uint64(b))
	case CodeDecimal64:
		return Decimal64(b)
	case CodeTimestamp:
		return time.UnixMilli(int64(binary.BigEndian.Uint64(b))).UTC()
	case CodeDecimal128:
		return Decimal128(b)
	case CodeUUID:
		return UUID(b)
	}
	return nil // CodeNull
}
