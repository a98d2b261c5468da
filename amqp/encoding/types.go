// Package encoding implements the AMQP 1.0 type system (OASIS AMQP 1.0, part 1):
// every primitive type in every encoding, described types, lists, maps and
// arrays, as append-style encoders and a bounds-checked decoder that never
// trusts a length from the wire.
//
// It owns the mapping between AMQP values and bytes and nothing above it:
// it knows no performatives, messages or connections (those live in
// amqp/frames and amqp/message, which build on the Decoder's typed readers
// and the Append* functions), and it does no I/O.
//
// The decoder's guarantees: every length and element count is checked
// against the bytes remaining before anything is allocated, nesting is
// bounded by MaxDepth, and every failure is an *Error naming what was wrong
// and at which offset.
package encoding

// Go representations of AMQP values, as the decoder returns them and the
// encoder accepts them:
//
//	null           nil
//	boolean        bool
//	ubyte..ulong   uint8, uint16, uint32, uint64
//	byte..long     int8, int16, int32, int64
//	float, double  float32, float64
//	decimalN       Decimal32, Decimal64, Decimal128 (the raw bytes)
//	char           Char
//	timestamp      time.Time (UTC, millisecond precision)
//	uuid           UUID
//	binary         []byte
//	string         string
//	symbol         Symbol
//	list           List
//	map            Map (ordered pairs, any key type)
//	array          Array
//	described      *Described
//
// The encoder also accepts Fields and Annotations (as maps), []Symbol and
// []string (as arrays), and int/uint (as long/ulong).

// Symbol is an AMQP symbol: ASCII, used for names and conditions.
type Symbol string

// UUID is an AMQP uuid in RFC 4122 byte order.
type UUID [16]byte

// Char is an AMQP char: one UTF-32 code point.
type Char rune

// Decimal32 is an IEEE 754 decimal32, carried as its encoded bytes.
type Decimal32 [4]byte

// Decimal64 is an IEEE 754 decimal64, carried as its encoded bytes.
type Decimal64 [8]byte

// Decimal128 is an IEEE 754 decimal128, carried as its encoded bytes.
type Decimal128 [16]byte

// List is an AMQP list.
type List []any

// Pair is one key/value entry of a Map.
type Pair struct{ Key, Value any }

// Map is an AMQP map in wire order; keys may be of any AMQP type.
type Map []Pair

// Fields is an AMQP fields map: symbol keys (properties, filter sets).
type Fields map[Symbol]any

// Annotations is an AMQP annotations map: keys are Symbol or uint64.
type Annotations map[any]any

// Described is a described value. Descriptor is a uint64 (domain<<32|id) or a Symbol.
type Described struct {
	Descriptor any
	Value      any
}

// Array is an AMQP array: every element shares one constructor. Code is the
// element type's format code (e.g. 0xa3 for symbols); for arrays of described
// values Descriptor is set and Code is the code of the described value's type.
type Array struct {
	Code       byte
	Descriptor any
	Elems      []any
}
