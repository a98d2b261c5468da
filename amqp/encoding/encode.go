package encoding

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Append appends v in its most compact encoding. v is one of the Go
// representations listed in types.go (also Fields, Annotations, []Symbol,
// []string, int and uint). A value of any other type is an error.
func Append(dst []byte, v any) ([]byte, error) { return appendValue(dst, v, 0) }

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return dst, fmt.Errorf("amqp encode: nesting deeper than %d", MaxDepth)
	}
	switch v := v.(type) {
	case nil:
		return AppendNull(dst), nil
	case bool:
		return AppendBool(dst, v), nil
	case uint8:
		return AppendUbyte(dst, v), nil
	case uint16:
		return AppendUshort(dst, v), nil
	case uint32:
		return AppendUint(dst, v), nil
	case uint64:
		return AppendUlong(dst, v), nil
	case uint:
		return AppendUlong(dst, uint64(v)), nil
	case int8:
		return AppendByte(dst, v), nil
	case int16:
		return AppendShort(dst, v), nil
	case int32:
		return AppendInt(dst, v), nil
	case int64:
		return AppendLong(dst, v), nil
	case int:
		return AppendLong(dst, int64(v)), nil
	case float32:
		return AppendFloat(dst, v), nil
	case float64:
		return AppendDouble(dst, v), nil
	case Decimal32:
		return AppendDecimal32(dst, v), nil
	case Decimal64:
		return AppendDecimal64(dst, v), nil
	case Decimal128:
		return AppendDecimal128(dst, v), nil
	case Char:
		return AppendChar(dst, v), nil
	case time.Time:
		return AppendTimestamp(dst, v), nil
	case UUID:
		return AppendUUID(dst, v), nil
	case []byte:
		return AppendBinary(dst, v), nil
	case string:
		return AppendString(dst, v), nil
	case Symbol:
		return AppendSymbol(dst, v), nil
	case []Symbol:
		return AppendSymbolArray(dst, v), nil
	case []string:
		elems := make([]any, len(v))
		for i, s := range v {
			elems[i] = s
		}
		return appendArray(dst, Array{Code: CodeStr8, Elems: elems}, depth)
	case List:
		return appendList(dst, v, depth)
	case Map:
		return appendMap(dst, v, depth)
	case Fields:
		return appendFields(dst, v, depth)
	case Annotations:
		return appendAnnotations(dst, v, depth)
	case Array:
		return appendArray(dst, v, depth)
	case *Described:
		if v == nil {
			return AppendNull(dst), nil
		}
		return appendDescribed(dst, v, depth)
	}
	return dst, fmt.Errorf("amqp encode: unsupported type %T", v)
}

func appendDescribed(dst []byte, v *Described, depth int) ([]byte, error) {
	switch desc := v.Descriptor.(type) {
	case uint64:
		dst = AppendDescriptor(dst, desc)
	case Symbol:
		dst = AppendSymbolDescriptor(dst, desc)
	default:
		return dst, fmt.Errorf("amqp encode: descriptor is %T, want uint64 or Symbol", v.Descriptor)
	}
	return appendValue(dst, v.Value, depth+1)
}

func appendList(dst []byte, l List, depth int) ([]byte, error) {
	dst, start := BeginList(dst)
	var err error
	for _, e := range l {
		if dst, err = appendValue(dst, e, depth+1); err != nil {
			return dst, err
		}
	}
	return EndList(dst, start, len(l)), nil
}

func appendMap(dst []byte, m Map, depth int) ([]byte, error) {
	dst, start := BeginMap(dst)
	var err error
	for _, p := range m {
		if dst, err = appendValue(dst, p.Key, depth+1); err != nil {
			return dst, err
		}
		if dst, err = appendValue(dst, p.Value, depth+1); err != nil {
			return dst, err
		}
	}
	return EndMap(dst, start, 2*len(m)), nil
}

// AppendFields appends a fields map with its keys in sorted order (so the
// encoding is deterministic). A nil map is written as an empty map.
func AppendFields(dst []byte, f Fields) ([]byte, error) { return appendFields(dst, f, 0) }

func appendFields(dst []byte, f Fields, depth int) ([]byte, error) {
	keys := make([]Symbol, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst, start := BeginMap(dst)
	var err error
	for _, k := range keys {
		dst = AppendSymbol(dst, k)
		if dst, err = appendValue(dst, f[k], depth+1); err != nil {
			return dst, err
		}
	}
	return EndMap(dst, start, 2*len(keys)), nil
}

// AppendAnnotations appends an annotations map: numeric keys (uint64) in
// ascending order, then symbol keys in sorted order. Keys of other types
// are an error. A nil map is written as an empty map.
func AppendAnnotations(dst []byte, a Annotations) ([]byte, error) {
	return appendAnnotations(dst, a, 0)
}

func appendAnnotations(dst []byte, a Annotations, depth int) ([]byte, error) {
	var nums []uint64
	var syms []Symbol
	for k := range a {
		switch k := k.(type) {
		case uint64:
			nums = append(nums, k)
		case Symbol:
			syms = append(syms, k)
		default:
			return dst, fmt.Errorf("amqp encode: annotations key is %T, want uint64 or Symbol", k)
		}
	}
	slices.Sort(nums)
	slices.Sort(syms)
	dst, start := BeginMap(dst)
	var err error
	for _, k := range nums {
		dst = AppendUlong(dst, k)
		if dst, err = appendValue(dst, a[k], depth+1); err != nil {
			return dst, err
		}
	}
	for _, k := range syms {
		dst = AppendSymbol(dst, k)
		if dst, err = appendValue(dst, a[k], depth+1); err != nil {
			return dst, err
		}
	}
	return EndMap(dst, start, 2*len(a)), nil
}

// appendArray writes an Array. When a.Code is 0 the element code is inferred
// from the first element (an empty array without a code is an error). An
// 8-bit variable-width or compound code is widened to its 32-bit variant
// when an element needs it; otherwise the code given is honoured.
func appendArray(dst []byte, a Array, depth int) ([]byte, error) {
	code := a.Code
	if code == 0 {
		if len(a.Elems) == 0 {
			return dst, fmt.Errorf("amqp encode: empty array without an element code")
		}
		var err error
		if code, err = arrayCodeFor(elemValue(a.Elems[0], a.Descriptor != nil)); err != nil {
			return dst, err
		}
		if code == CodeVbin32 || code == CodeStr32 || code == CodeSym32 {
			code &^= 0x10 // try the 8-bit form first
		}
	}
	out, err := appendArrayAs(dst, a, code, depth)
	if err == errNeedWide {
		out, err = appendArrayAs(dst, a, code|0x10, depth)
	}
	return out, err
}

// errNeedWide reports an element too large for an array's 8-bit element code.
var errNeedWide = errors.New("amqp encode: element needs the 32-bit element code")

func elemValue(e any, described bool) any {
	if d, ok := e.(*Described); ok && d != nil && described {
		return d.Value
	}
	return e
}

func appendArrayAs(dst []byte, a Array, code byte, depth int) ([]byte, error) {
	dst, start := BeginArray(dst)
	if a.Descriptor != nil {
		switch desc := a.Descriptor.(type) {
		case uint64:
			dst = AppendDescriptor(dst, desc)
		case Symbol:
			dst = AppendSymbolDescriptor(dst, desc)
		default:
			return dst[:start], fmt.Errorf("amqp encode: array descriptor is %T, want uint64 or Symbol", a.Descriptor)
		}
	}
	dst = append(dst, code)
	var err error
	for i, e := range a.Elems {
		if dst, err = appendArrayElem(dst, code, elemValue(e, a.Descriptor != nil), depth+1); err != nil {
			if err == errNeedWide {
				return dst[:start], err
			}
			return dst[:start], fmt.Errorf("array element %d: %w", i, err)
		}
	}
	if body := len(dst) - start - compoundHeader32; fixedWidth(code) == 0 && len(a.Elems) > body {
		// The decoder bounds such arrays by their body size (see arrayContents).
		return dst[:start], fmt.Errorf("amqp encode: %d zero-width elements (code 0x%02x) exceed the array's %d body bytes",
			len(a.Elems), code, body)
	}
	return EndArray(dst, start, len(a.Elems)), nil
}

func arrayCodeFor(v any) (byte, error) {
	switch v.(type) {
	case bool:
		return CodeBool, nil
	case uint8:
		return CodeUbyte, nil
	case uint16:
		return CodeUshort, nil
	case uint32:
		return CodeUint, nil
	case uint64, uint:
		return CodeUlong, nil
	case int8:
		return CodeByte, nil
	case int16:
		return CodeShort, nil
	case int32:
		return CodeInt, nil
	case int64, int:
		return CodeLong, nil
	case float32:
		return CodeFloat, nil
	case float64:
		return CodeDouble, nil
	case Decimal32:
		return CodeDecimal32, nil
	case Decimal64:
		return CodeDecimal64, nil
	case Decimal128:
		return CodeDecimal128, nil
	case Char:
		return CodeChar, nil
	case time.Time:
		return CodeTimestamp, nil
	case UUID:
		return CodeUUID, nil
	case []byte:
		return CodeVbin32, nil
	case string:
		return CodeStr32, nil
	case Symbol:
		return CodeSym32, nil
	case List:
		return CodeList32, nil
	case Map:
		return CodeMap32, nil
	case Array:
		return CodeArray32, nil
	}
	return 0, fmt.Errorf("amqp encode: no array element code for %T", v)
}

// appendArrayElem writes one array element's body (no constructor) in the
// encoding named by code.
func appendArrayElem(dst []byte, code byte, v any, depth int) ([]byte, error) {
	mismatch := func() ([]byte, error) {
		return dst, fmt.Errorf("amqp encode: %T does not fit array element code 0x%02x", v, code)
	}
	if code == CodeNull {
		if v != nil {
			return mismatch()
		}
		return dst, nil
	}
	// Encode with a constructor into dst, then drop or check the constructor.
	var tmp []byte
	var err error
	switch code {
	case CodeBool:
		b, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case CodeUint:
		u, ok := v.(uint32)
		if !ok {
			return mismatch()
		}
		return append(dst, byte(u>>24), byte(u>>16), byte(u>>8), byte(u)), nil
	case CodeUlong:
		var u uint64
		switch x := v.(type) {
		case uint64:
			u = x
		case uint:
			u = uint64(x)
		default:
			return mismatch()
		}
		return be64(dst, u), nil
	case CodeInt:
		i, ok := v.(int32)
		if !ok {
			return mismatch()
		}
		u := uint32(i)
		return append(dst, byte(u>>24), byte(u>>16), byte(u>>8), byte(u)), nil
	case CodeLong:
		var i int64
		switch x := v.(type) {
		case int64:
			i = x
		case int:
			i = int64(x)
		default:
			return mismatch()
		}
		return be64(dst, uint64(i)), nil
	case CodeSmallUint, CodeSmallUlong, CodeSmallInt, CodeSmallLong, CodeUint0, CodeUlong0,
		CodeTrue, CodeFalse, CodeList0:
		return appendCompactElem(dst, code, v)
	case CodeList8, CodeMap8, CodeArray8, CodeList32, CodeMap32, CodeArray32:
		mark := len(dst)
		if tmp, err = appendValue(dst, v, depth); err != nil {
			return dst, err
		}
		// Rewrite into the form the element constructor promised.
		return reshapeCompound(tmp, mark, code)
	case CodeVbin8, CodeStr8, CodeSym8, CodeVbin32, CodeStr32, CodeSym32:
		var b []byte
		switch x := v.(type) {
		case []byte:
			if code&0x0f != CodeVbin8&0x0f {
				return mismatch()
			}
			b = x
		case string:
			if code&0x0f != CodeStr8&0x0f {
				return mismatch()
			}
			b = []byte(x)
		case Symbol:
			if code&0x0f != CodeSym8&0x0f {
				return mismatch()
			}
			b = []byte(x)
		default:
			return mismatch()
		}
		if code&0xf0 == 0xa0 {
			if len(b) > 255 {
				return dst, errNeedWide
			}
			dst = append(dst, byte(len(b)))
		} else {
			dst = append(dst, byte(len(b)>>24), byte(len(b)>>16), byte(len(b)>>8), byte(len(b)))
		}
		return append(dst, b...), nil
	}
	mark := len(dst)
	if tmp, err = appendValue(dst, v, depth); err != nil {
		return dst, err
	}
	if tmp[mark] != code {
		return mismatch()
	}
	return append(tmp[:mark], tmp[mark+1:]...), nil
}

// reshapeCompound rewrites the list, map or array just appended at mark
// (with its own constructor) into the body form of element code code: no
// constructor, 8- or 32-bit size and count. It returns errNeedWide when an
// 8-bit code cannot hold it.
func reshapeCompound(b []byte, mark int, code byte) ([]byte, error) {
	got := b[mark]
	family := got
	if got == CodeList0 {
		family = CodeList8
	}
	if family&^0x10 != code&^0x10 {
		return b[:mark], fmt.Errorf("amqp encode: value 0x%02x does not fit array element code 0x%02x", got, code)
	}
	var count uint32
	var body []byte
	switch got {
	case CodeList0:
	case CodeList8, CodeMap8, CodeArray8:
		count = uint32(b[mark+2])
		body = b[mark+3:]
	default:
		count = binary.BigEndian.Uint32(b[mark+5:])
		body = b[mark+9:]
	}
	tail := append([]byte(nil), body...)
	if code&0x10 == 0 { // 8-bit form
		if len(tail)+1 > 255 || count > 255 {
			return b[:mark], errNeedWide
		}
		b = append(b[:mark], byte(len(tail)+1), byte(count))
		return append(b, tail...), nil
	}
	if uint64(len(tail))+4 > math.MaxUint32 {
		return b[:mark], fmt.Errorf("amqp encode: compound too large")
	}
	b = be32(b[:mark], uint32(len(tail))+4)
	b = be32(b, count)
	return append(b, tail...), nil
}

func be32(dst []byte, u uint32) []byte {
	return append(dst, byte(u>>24), byte(u>>16), byte(u>>8), byte(u))
}

func be64(dst []byte, u uint64) []byte {
	return be32(be32(dst, uint32(u>>32)), uint32(u))
}

// appendCompactElem writes an array element in one of the compact encodings
// (one byte or none), which only some values fit.
func appendCompactElem(dst []byte, code byte, v any) ([]byte, error) {
	fits := false
	var b byte
	switch code {
	case CodeSmallUint:
		u, ok := v.(uint32)
		fits, b = ok && u < 256, byte(u)
	case CodeSmallUlong:
		u, ok := v.(uint64)
		fits, b = ok && u < 256, byte(u)
	case CodeSmallInt:
		i, ok := v.(int32)
		fits, b = ok && i >= math.MinInt8 && i <= math.MaxInt8, byte(int8(i))
	case CodeSmallLong:
		i, ok := v.(int64)
		fits, b = ok && i >= math.MinInt8 && i <= math.MaxInt8, byte(int8(i))
	case CodeUint0:
		u, ok := v.(uint32)
		return dst, fitErr(ok && u == 0, code, v)
	case CodeUlong0:
		u, ok := v.(uint64)
		return dst, fitErr(ok && u == 0, code, v)
	case CodeTrue, CodeFalse:
		x, ok := v.(bool)
		return dst, fitErr(ok && x == (code == CodeTrue), code, v)
	case CodeList0:
		l, ok := v.(List)
		return dst, fitErr(ok && len(l) == 0, code, v)
	}
	if err := fitErr(fits, code, v); err != nil {
		return dst, err
	}
	return append(dst, b), nil
}

func fitErr(fits bool, code byte, v any) error {
	if fits {
		return nil
	}
	return fmt.Errorf("amqp encode: %T value %v does not fit array element code 0x%02x", v, v, code)
}
