package encoding

import (
	"encoding/binary"
	"math"
	"time"
)

// The Append* functions append one value in its most compact encoding and
// return the extended slice. They never allocate beyond growing dst.

// AppendNull appends null.
func AppendNull(dst []byte) []byte { return append(dst, CodeNull) }

// AppendBool appends a boolean as true (0x41) or false (0x42).
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, CodeTrue)
	}
	return append(dst, CodeFalse)
}

// AppendUbyte appends a ubyte.
func AppendUbyte(dst []byte, v uint8) []byte { return append(dst, CodeUbyte, v) }

// AppendUshort appends a ushort.
func AppendUshort(dst []byte, v uint16) []byte {
	return binary.BigEndian.AppendUint16(append(dst, CodeUshort), v)
}

// AppendUint appends a uint as uint0, smalluint or uint.
func AppendUint(dst []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(dst, CodeUint0)
	case v < 256:
		return append(dst, CodeSmallUint, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(dst, CodeUint), v)
}

// AppendUlong appends a ulong as ulong0, smallulong or ulong.
func AppendUlong(dst []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(dst, CodeUlong0)
	case v < 256:
		return append(dst, CodeSmallUlong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, CodeUlong), v)
}

// AppendByte appends a byte (signed 8-bit).
func AppendByte(dst []byte, v int8) []byte { return append(dst, CodeByte, byte(v)) }

// AppendShort appends a short.
func AppendShort(dst []byte, v int16) []byte {
	return binary.BigEndian.AppendUint16(append(dst, CodeShort), uint16(v))
}

// AppendInt appends an int as smallint or int.
func AppendInt(dst []byte, v int32) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(dst, CodeSmallInt, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint32(append(dst, CodeInt), uint32(v))
}

// AppendLong appends a long as smalllong or long.
func AppendLong(dst []byte, v int64) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(dst, CodeSmallLong, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint64(append(dst, CodeLong), uint64(v))
}

// AppendFloat appends an IEEE 754 binary32.
func AppendFloat(dst []byte, v float32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, CodeFloat), math.Float32bits(v))
}

// AppendDouble appends an IEEE 754 binary64.
func AppendDouble(dst []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, CodeDouble), math.Float64bits(v))
}

// AppendDecimal32 appends a decimal32.
func AppendDecimal32(dst []byte, v Decimal32) []byte {
	return append(append(dst, CodeDecimal32), v[:]...)
}

// AppendDecimal64 appends a decimal64.
func AppendDecimal64(dst []byte, v Decimal64) []byte {
	return append(append(dst, CodeDecimal64), v[:]...)
}

// AppendDecimal128 appends a decimal128.
func AppendDecimal128(dst []byte, v Decimal128) []byte {
	return append(append(dst, CodeDecimal128), v[:]...)
}

// AppendChar appends a char (UTF-32BE).
func AppendChar(dst []byte, v Char) []byte {
	return binary.BigEndian.AppendUint32(append(dst, CodeChar), uint32(v))
}

// AppendTimestamp appends a timestamp: milliseconds since the Unix epoch.
func AppendTimestamp(dst []byte, t time.Time) []byte {
	return AppendTimestampMillis(dst, t.UnixMilli())
}

// AppendTimestampMillis appends a timestamp given in milliseconds since the Unix epoch.
func AppendTimestampMillis(dst []byte, ms int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, CodeTimestamp), uint64(ms))
}

// AppendUUID appends a uuid.
func AppendUUID(dst []byte, v UUID) []byte { return append(append(dst, CodeUUID), v[:]...) }

// appendVar appends a variable-width value with its 8- or 32-bit size.
func appendVar[T ~string | ~[]byte](dst []byte, code8, code32 byte, v T) []byte {
	return append(appendVarHeader(dst, code8, code32, len(v)), v...)
}

// appendVarHeader appends the constructor and length of a variable-width
// value of n bytes: the one-byte-length form when n fits.
func appendVarHeader(dst []byte, code8, code32 byte, n int) []byte {
	if n < 256 {
		return append(dst, code8, byte(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, code32), uint32(n))
}

// AppendBinary appends binary as vbin8 or vbin32. A nil slice is still
// written as zero-length binary; use AppendNull for null.
func AppendBinary(dst []byte, v []byte) []byte { return appendVar(dst, CodeVbin8, CodeVbin32, v) }

// AppendBinaryHeader appends what AppendBinary writes before the bytes of
// a binary of n bytes, for a caller that writes the bytes itself.
func AppendBinaryHeader(dst []byte, n int) []byte {
	return appendVarHeader(dst, CodeVbin8, CodeVbin32, n)
}

// AppendString appends a UTF-8 string as str8 or str32.
func AppendString(dst []byte, v string) []byte { return appendVar(dst, CodeStr8, CodeStr32, v) }

// AppendStringBytes appends UTF-8 bytes as str8 or str32.
func AppendStringBytes(dst []byte, v []byte) []byte { return appendVar(dst, CodeStr8, CodeStr32, v) }

// AppendSymbol appends a symbol as sym8 or sym32.
func AppendSymbol(dst []byte, v Symbol) []byte { return appendVar(dst, CodeSym8, CodeSym32, v) }

// AppendSymbolArray appends syms as an array of symbols (sym8 elements when
// every symbol fits, sym32 otherwise). An empty slice is written as an empty array.
func AppendSymbolArray(dst []byte, syms []Symbol) []byte {
	code := CodeSym8
	for _, s := range syms {
		if len(s) > 255 {
			code = CodeSym32
			break
		}
	}
	dst, start := BeginArray(dst)
	dst = append(dst, code)
	for _, s := range syms {
		if code == CodeSym8 {
			dst = append(dst, byte(len(s)))
		} else {
			dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
		}
		dst = append(dst, s...)
	}
	return EndArray(dst, start, len(syms))
}

// AppendDescriptor appends the start of a described value with a numeric
// descriptor (the 0x00 constructor and the descriptor as a ulong). The
// described value itself follows.
func AppendDescriptor(dst []byte, code uint64) []byte {
	return AppendUlong(append(dst, CodeDescribed), code)
}

// AppendSymbolDescriptor appends the start of a described value with a
// symbolic descriptor.
func AppendSymbolDescriptor(dst []byte, name Symbol) []byte {
	return AppendSymbol(append(dst, CodeDescribed), name)
}

// compoundHeader32 is the size of a list32/map32/array32 header: code, size, count.
const compoundHeader32 = 9

// BeginList reserves a list header at the end of dst and returns the
// extended slice and the header's offset for EndList. Append the elements,
// then call EndList with their count.
func BeginList(dst []byte) ([]byte, int) { return beginCompound(dst) }

// EndList completes the list begun at start holding count elements,
// rewriting it as list0 or list8 when it fits.
func EndList(dst []byte, start, count int) []byte {
	if count == 0 {
		dst[start] = CodeList0
		return dst[:start+1]
	}
	return endCompound(dst, start, count, CodeList8, CodeList32)
}

// BeginMap reserves a map header; see BeginList.
func BeginMap(dst []byte) ([]byte, int) { return beginCompound(dst) }

// EndMap completes the map begun at start; count is the number of keys and
// values together (twice the number of entries).
func EndMap(dst []byte, start, count int) []byte {
	return endCompound(dst, start, count, CodeMap8, CodeMap32)
}

// BeginArray reserves an array header; append the element constructor (a
// format code, or a descriptor followed by one) and the element bodies
// without constructors, then call EndArray.
func BeginArray(dst []byte) ([]byte, int) { return beginCompound(dst) }

// EndArray completes the array begun at start holding count elements.
func EndArray(dst []byte, start, count int) []byte {
	return endCompound(dst, start, count, CodeArray8, CodeArray32)
}

func beginCompound(dst []byte) ([]byte, int) {
	start := len(dst)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0, 0), start
}

func endCompound(dst []byte, start, count int, code8, code32 byte) []byte {
	body := len(dst) - start - compoundHeader32
	if body+1 <= 255 && count <= 255 {
		dst[start] = code8
		dst[start+1] = byte(body + 1)
		dst[start+2] = byte(count)
		copy(dst[start+3:], dst[start+compoundHeader32:])
		return dst[:len(dst)-6]
	}
	dst[start] = code32
	binary.BigEndian.PutUint32(dst[start+1:], uint32(body+4))
	binary.BigEndian.PutUint32(dst[start+5:], uint32(count))
	return dst
}
