package filter

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// kind is the evaluation type of a value. Integer kinds follow C#'s
// promotion: sbyte, byte, short and ushort widen to int (kInt32).
type kind uint8

const (
	kNull     kind = iota // NULL or unknown
	kBool                 // i is 0 or 1
	kInt32                // i
	kUint32               // i holds the uint32
	kInt64                // i
	kUint64               // i holds the bits of the uint64
	kFloat32              // f holds the float32 exactly
	kFloat64              // f
	kString               // s
	kTime                 // x holds a time.Time
	kDuration             // i holds nanoseconds
	kUUID                 // x holds a [16]byte
	kBytes                // x holds a []byte
	kOther                // x holds a value of an unsupported type
)

var kindNames = [...]string{
	kNull: "null", kBool: "bool", kInt32: "int", kUint32: "uint", kInt64: "long",
	kUint64: "ulong", kFloat32: "float", kFloat64: "double", kString: "string",
	kTime: "DateTime", kDuration: "TimeSpan", kUUID: "Guid", kBytes: "byte[]",
	kOther: "unsupported type",
}

func (k kind) String() string { return kindNames[k] }

// a returns the kind's name with an indefinite article, for messages.
func (k kind) a() string {
	switch k {
	case kInt32, kUint32, kOther:
		return "an " + kindNames[k]
	}
	return "a " + kindNames[k]
}

// value is an evaluated operand. x holds the DateTime, Guid, byte slice or
// unsupported value of those kinds; for the other kinds it holds, when not
// nil, the Go value the operand came from (a property or parameter), which
// SET stores unchanged.
type value struct {
	k kind
	i int64
	f float64
	s string
	x any
}

var nullValue = value{}

func boolValue(b bool) value {
	if b {
		return value{k: kBool, i: 1}
	}
	return value{k: kBool}
}

func (v value) isNumeric() bool { return v.k >= kInt32 && v.k <= kFloat64 }

// fromAny converts a property or parameter value to a value.
func fromAny(a any) value {
	v := fromAnyNoOrig(a)
	if v.k != kNull {
		v.x = a
	}
	return v
}

func fromAnyNoOrig(a any) value {
	switch t := a.(type) {
	case nil:
		return nullValue
	case string:
		return value{k: kString, s: t}
	case bool:
		return boolValue(t)
	case int:
		if t >= math.MinInt32 && t <= math.MaxInt32 {
			return value{k: kInt32, i: int64(t)}
		}
		return value{k: kInt64, i: int64(t)}
	case int8:
		return value{k: kInt32, i: int64(t)}
	case int16:
		return value{k: kInt32, i: int64(t)}
	case int32:
		return value{k: kInt32, i: int64(t)}
	case int64:
		return value{k: kInt64, i: t}
	case uint8:
		return value{k: kInt32, i: int64(t)}
	case uint16:
		return value{k: kInt32, i: int64(t)}
	case uint32:
		return value{k: kUint32, i: int64(t)}
	case uint64:
		return value{k: kUint64, i: int64(t)}
	case uint:
		return value{k: kUint64, i: int64(t)}
	case float32:
		return value{k: kFloat32, f: float64(t)}
	case float64:
		return value{k: kFloat64, f: t}
	case time.Time:
		return value{k: kTime, x: t}
	case time.Duration:
		return value{k: kDuration, i: int64(t)}
	case [16]byte:
		return value{k: kUUID, x: t}
	case []byte:
		return value{k: kBytes, x: t}
	}
	return value{k: kOther, x: a}
}

// toAny converts v to the Go value a rule action stores.
func (v value) toAny() any {
	if v.x != nil {
		return v.x
	}
	switch v.k {
	case kBool:
		return v.i != 0
	case kInt32:
		return int32(v.i)
	case kUint32:
		return uint32(v.i)
	case kInt64:
		return v.i
	case kUint64:
		return uint64(v.i)
	case kFloat32:
		return float32(v.f)
	case kFloat64:
		return v.f
	case kString:
		return v.s
	case kDuration:
		return time.Duration(v.i)
	case kTime, kUUID, kBytes, kOther:
		return v.x
	}
	return nil
}

// asFloat returns a numeric value as float64.
func (v value) asFloat() float64 {
	switch v.k {
	case kFloat32, kFloat64:
		return v.f
	case kUint32, kUint64:
		return float64(uint64(v.i))
	}
	return float64(v.i)
}

// isUnsigned reports whether v is of an unsigned integer kind.
func (v value) isUnsigned() bool { return v.k == kUint32 || v.k == kUint64 }

// compareNumbers compares two numeric values exactly, after C#'s binary
// numeric promotion; signed/unsigned long mixes (which C# rejects) compare
// by mathematical value. ok is false when either side is NaN.
func compareNumbers(a, b value) (c int, ok bool) {
	if a.k == kFloat32 || a.k == kFloat64 || b.k == kFloat32 || b.k == kFloat64 {
		x, y := a.asFloat(), b.asFloat()
		if a.k == kFloat32 && b.k != kFloat64 || b.k == kFloat32 && a.k != kFloat64 {
			x, y = float64(float32(x)), float64(float32(y))
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		case x == y:
			return 0, true
		}
		return 0, false
	}
	au, bu := a.isUnsigned(), b.isUnsigned()
	switch {
	case au && bu:
		return cmp.Compare(uint64(a.i), uint64(b.i)), true
	case au && !bu:
		if b.i < 0 {
			return 1, true
		}
		return cmp.Compare(uint64(a.i), uint64(b.i)), true
	case !au && bu:
		if a.i < 0 {
			return -1, true
		}
		return cmp.Compare(uint64(a.i), uint64(b.i)), true
	}
	return cmp.Compare(a.i, b.i), true
}

// promote returns the kind C#'s binary numeric promotion gives two numeric
// operands. Mixing ulong with a signed kind (a compile error in C#) yields
// ulong when the signed operand is not negative, long when the ulong fits
// in a long, and double otherwise.
func promote(a, b value) kind {
	switch {
	case a.k == kFloat64 || b.k == kFloat64:
		return kFloat64
	case a.k == kFloat32 || b.k == kFloat32:
		return kFloat32
	case a.k == kUint64 || b.k == kUint64:
		other := b
		u := a
		if b.k == kUint64 {
			other, u = a, b
		}
		if other.isUnsigned() || other.i >= 0 {
			return kUint64
		}
		if u.i >= 0 { // the ulong fits in a long
			return kInt64
		}
		return kFloat64
	case a.k == kInt64 || b.k == kInt64:
		return kInt64
	case a.k == kUint32 && b.k == kUint32:
		return kUint32
	case a.k == kUint32 || b.k == kUint32:
		return kInt64
	}
	return kInt32
}

// arith applies + - * / % to two numeric values. Integer arithmetic wraps
// around at the width of the promoted type (C#'s unchecked context);
// integer division or remainder by zero is an error.
func arith(op tokKind, a, b value) (value, error) {
	k := promote(a, b)
	switch k {
	case kFloat64, kFloat32:
		x, y := a.asFloat(), b.asFloat()
		var r float64
		switch op {
		case tPlus:
			r = x + y
		case tMinus:
			r = x - y
		case tStar:
			r = x * y
		case tSlash:
			r = x / y
		case tPercent:
			r = math.Mod(x, y)
		}
		if k == kFloat32 {
			r = float64(float32(r))
		}
		return value{k: k, f: r}, nil
	}
	if (op == tSlash || op == tPercent) && b.i == 0 {
		return nullValue, errDivideByZero
	}
	var r int64
	if k == kUint64 || k == kUint32 {
		x, y := uint64(a.i), uint64(b.i)
		var u uint64
		switch op {
		case tPlus:
			u = x + y
		case tMinus:
			u = x - y
		case tStar:
			u = x * y
		case tSlash:
			u = x / y
		case tPercent:
			u = x % y
		}
		if k == kUint32 {
			u = uint64(uint32(u))
		}
		return value{k: k, i: int64(u)}, nil
	}
	x, y := a.i, b.i
	switch op {
	case tPlus:
		r = x + y
	case tMinus:
		r = x - y
	case tStar:
		r = x * y
	case tSlash:
		if y == -1 {
			r = -x
		} else {
			r = x / y
		}
	case tPercent:
		if y == -1 {
			r = 0
		} else {
			r = x % y
		}
	}
	if k == kInt32 {
		r = int64(int32(r))
	}
	return value{k: k, i: r}, nil
}

var errDivideByZero = fmt.Errorf("attempted to divide by zero")

// equalValues compares two non-null values for equality. Values of kinds
// that cannot be compared are unequal; comparable is false for them.
func equalValues(a, b value) (eq, comparable bool) {
	if a.isNumeric() && b.isNumeric() {
		c, ok := compareNumbers(a, b)
		return ok && c == 0, true
	}
	switch {
	case a.k == kString && b.k == kString:
		return a.s == b.s, true
	case a.k == kBool && b.k == kBool:
		return a.i == b.i, true
	case a.k == kDuration && b.k == kDuration:
		return a.i == b.i, true
	case a.k == kTime && b.k == kTime:
		return a.x.(time.Time).Equal(b.x.(time.Time)), true
	case a.k == kUUID && b.k == kUUID:
		return a.x.([16]byte) == b.x.([16]byte), true
	case a.k == kBytes && b.k == kBytes:
		return bytes.Equal(a.x.([]byte), b.x.([]byte)), true
	case a.k == kUUID && b.k == kString:
		return strings.EqualFold(formatUUID(a.x.([16]byte)), b.s), true
	case a.k == kString && b.k == kUUID:
		return strings.EqualFold(a.s, formatUUID(b.x.([16]byte))), true
	}
	return false, false
}

// orderValues compares two non-null values for <, <=, >, >=.
func orderValues(a, b value) (c int, ok bool, err error) {
	if a.isNumeric() && b.isNumeric() {
		c, ok := compareNumbers(a, b)
		return c, ok, nil
	}
	switch {
	case a.k == kDuration && b.k == kDuration:
		return cmp.Compare(a.i, b.i), true, nil
	case a.k == kTime && b.k == kTime:
		return a.x.(time.Time).Compare(b.x.(time.Time)), true, nil
	}
	return 0, false, fmt.Errorf("cannot order %s and %s", a.k.a(), b.k.a())
}

// valuesEqual reports whether two Go property values are equal under the
// SQL filter's equality (numbers compare across types).
func valuesEqual(a, b any) bool {
	va, vb := fromAnyNoOrig(a), fromAnyNoOrig(b)
	if va.k == kNull || vb.k == kNull {
		return va.k == kNull && vb.k == kNull
	}
	eq, _ := equalValues(va, vb)
	return eq
}

// formatUUID renders a uuid in the 8-4-4-4-12 lower-case form.
func formatUUID(u [16]byte) string {
	const hexdig = "0123456789abcdef"
	var b [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexdig[c>>4], hexdig[c&15]
		j += 2
	}
	return string(b[:])
}

// formatDouble renders f as .NET's double.ToString() does: the shortest
// round-trip digits, in exponent form below 1E-04 and from 1E+15.
func formatDouble(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0 && math.Signbit(f):
		return "-0"
	case f == 0:
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e15 || a < 1e-4 {
		// Go, like .NET, writes at least two exponent digits.
		return strconv.FormatFloat(f, 'E', -1, bits)
	}
	return strconv.FormatFloat(f, 'f', -1, bits)
}

// formatDuration renders d in .NET's TimeSpan "c" form: [-][d.]hh:mm:ss[.fffffff].
func formatDuration(d time.Duration) string {
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = uint64(-d)
	}
	ticks := u / 100
	days := ticks / (864e9)
	rem := ticks % 864e9
	h, rem := rem/36e9, rem%36e9
	m, rem := rem/6e8, rem%6e8
	s, frac := rem/1e7, rem%1e7
	if days > 0 {
		fmt.Fprintf(&b, "%d.", days)
	}
	fmt.Fprintf(&b, "%02d:%02d:%02d", h, m, s)
	if frac > 0 {
		fmt.Fprintf(&b, ".%07d", frac)
	}
	return b.String()
}

// toText converts a non-null value to the string C#'s ToString would give,
// for string concatenation and string-typed system properties.
func (v value) toText() (string, error) {
	switch v.k {
	case kString:
		return v.s, nil
	case kBool:
		if v.i != 0 {
			return "True", nil
		}
		return "False", nil
	case kInt32, kInt64:
		return strconv.FormatInt(v.i, 10), nil
	case kUint32, kUint64:
		return strconv.FormatUint(uint64(v.i), 10), nil
	case kFloat32:
		return formatDouble(v.f, 32), nil
	case kFloat64:
		return formatDouble(v.f, 64), nil
	case kTime:
		return v.x.(time.Time).UTC().Format("2006-01-02T15:04:05.9999999Z"), nil
	case kDuration:
		return formatDuration(time.Duration(v.i)), nil
	case kUUID:
		return formatUUID(v.x.([16]byte)), nil
	}
	return "", fmt.Errorf("cannot convert %s to a string", v.k.a())
}
