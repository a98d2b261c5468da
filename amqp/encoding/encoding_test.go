package encoding

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func mustAppend(t testing.TB, v any) []byte {
	t.Helper()
	b, err := Append(nil, v)
	if err != nil {
		t.Fatalf("Append(%#v): %v", v, err)
	}
	return b
}

// roundTripValues covers every type, in every width the encoder chooses.
func roundTripValues() []any {
	long := strings.Repeat("x", 300)
	ts := time.UnixMilli(1700000000123).UTC()
	return []any{
		nil, true, false,
		uint8(0), uint8(255), uint16(0), uint16(65535),
		uint32(0), uint32(7), uint32(255), uint32(256), uint32(math.MaxUint32),
		uint64(0), uint64(9), uint64(256), uint64(math.MaxUint64),
		int8(-128), int8(127), int16(-32768), int16(32767),
		int32(0), int32(-128), int32(127), int32(128), int32(math.MinInt32),
		int64(-1), int64(-129), int64(math.MaxInt64), int64(math.MinInt64),
		float32(1.5), float32(math.Inf(-1)), float64(-2.25), math.MaxFloat64,
		Decimal32{1, 2, 3, 4}, Decimal64{1, 2, 3, 4, 5, 6, 7, 8},
		Decimal128{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Char('€'), Char(0x1F600), ts, time.UnixMilli(-5).UTC(),
		UUID{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
		[]byte{}, []byte{1, 2, 3}, bytes.Repeat([]byte{7}, 256),
		"", "héllo", long,
		Symbol(""), Symbol("amqp:accepted:list"), Symbol(long),
		List{}, List{uint32(1), "two", nil, List{true}},
		List{[]byte(long), Map{{Key: "k", Value: int64(1)}}},
		Map{}, Map{{Key: Symbol("a"), Value: int32(1)}, {Key: uint64(2), Value: List{}}, {Key: nil, Value: "v"}},
		&Described{Descriptor: uint64(0x77), Value: "x"},
		&Described{Descriptor: Symbol("com.example:thing"), Value: List{int64(5)}},
		&Described{Descriptor: uint64(1), Value: &Described{Descriptor: uint64(2), Value: nil}},
		Array{Code: CodeSym8, Elems: []any{Symbol("a"), Symbol("bc")}},
		Array{Code: CodeSym32, Elems: []any{Symbol("a"), Symbol(long)}},
		Array{Code: CodeStr8, Elems: []any{}},
		Array{Code: CodeVbin8, Elems: []any{[]byte{1}, []byte{}}},
		Array{Code: CodeUint, Elems: []any{uint32(1), uint32(70000)}},
		Array{Code: CodeSmallUint, Elems: []any{uint32(1), uint32(200)}},
		Array{Code: CodeUint0, Elems: []any{uint32(0)}},
		Array{Code: CodeUlong, Elems: []any{uint64(1)}},
		Array{Code: CodeSmallUlong, Elems: []any{uint64(3)}},
		Array{Code: CodeUlong0, Elems: []any{uint64(0)}},
		Array{Code: CodeInt, Elems: []any{int32(-1)}},
		Array{Code: CodeSmallInt, Elems: []any{int32(-1)}},
		Array{Code: CodeLong, Elems: []any{int64(-1)}},
		Array{Code: CodeSmallLong, Elems: []any{int64(-100)}},
		Array{Code: CodeBool, Elems: []any{true, false}},
		Array{Code: CodeTrue, Elems: []any{true}},
		Array{Code: CodeFalse, Elems: []any{false}},
		Array{Code: CodeNull, Elems: []any{nil}},
		Array{Code: CodeUbyte, Elems: []any{uint8(1)}},
		Array{Code: CodeUshort, Elems: []any{uint16(1)}},
		Array{Code: CodeByte, Elems: []any{int8(1)}},
		Array{Code: CodeShort, Elems: []any{int16(1)}},
		Array{Code: CodeFloat, Elems: []any{float32(1)}},
		Array{Code: CodeDouble, Elems: []any{float64(1)}},
		Array{Code: CodeChar, Elems: []any{Char('a')}},
		Array{Code: CodeTimestamp, Elems: []any{ts}},
		Array{Code: CodeUUID, Elems: []any{UUID{1}}},
		Array{Code: CodeDecimal32, Elems: []any{Decimal32{1}}},
		Array{Code: CodeDecimal64, Elems: []any{Decimal64{1}}},
		Array{Code: CodeDecimal128, Elems: []any{Decimal128{1}}},
		Array{Code: CodeList8, Elems: []any{List{uint32(1)}, List{}}},
		Array{Code: CodeList32, Elems: []any{List{uint32(1)}, List{}}},
		Array{Code: CodeList0, Elems: []any{List{}}},
		Array{Code: CodeMap8, Elems: []any{Map{{Key: "a", Value: "b"}}}},
		Array{Code: CodeMap32, Elems: []any{Map{}}},
		Array{Code: CodeArray8, Elems: []any{Array{Code: CodeSym8, Elems: []any{Symbol("x")}}}},
		Array{Code: CodeArray32, Elems: []any{Array{Code: CodeUint, Elems: []any{uint32(5)}}}},
		Array{Code: CodeList32, Descriptor: uint64(0x24), Elems: []any{
			&Described{Descriptor: uint64(0x24), Value: List{}},
			&Described{Descriptor: uint64(0x24), Value: List{"x"}},
		}},
		Array{Code: CodeStr8, Descriptor: Symbol("my:type"), Elems: []any{
			&Described{Descriptor: Symbol("my:type"), Value: "v"},
		}},
		List{bytes.Repeat([]byte{1}, 70000)},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, v := range roundTripValues() {
		b := mustAppend(t, v)
		d := NewDecoder(b)
		got, err := d.ReadValue()
		if err != nil {
			t.Fatalf("ReadValue(%#v) from %x: %v", v, b, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip of %#v gave %#v (bytes %x)", v, got, b)
		}
		if d.Len() != 0 {
			t.Errorf("%#v: %d bytes left after ReadValue", v, d.Len())
		}
		s := NewDecoder(b)
		if err := s.Skip(); err != nil || s.Len() != 0 {
			t.Errorf("Skip over %#v: err %v, %d bytes left", v, err, s.Len())
		}
	}
}

func TestNaNRoundTrip(t *testing.T) {
	for _, v := range []any{float32(math.NaN()), math.NaN()} {
		b := mustAppend(t, v)
		d := NewDecoder(b)
		got, err := d.ReadValue()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustAppend(t, got), b) {
			t.Errorf("NaN %T did not keep its bits", v)
		}
	}
}

func hx(s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		panic(err)
	}
	return b
}

// TestEncodingGolden pins the encoder's choice of encoding for each value.
func TestEncodingGolden(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{nil, "40"}, {true, "41"}, {false, "42"},
		{uint8(5), "50 05"}, {uint16(258), "60 0102"},
		{uint32(0), "43"}, {uint32(255), "52 ff"}, {uint32(256), "70 00000100"},
		{uint64(0), "44"}, {uint64(1), "53 01"}, {uint64(256), "80 0000000000000100"},
		{int8(-1), "51 ff"}, {int16(-2), "61 fffe"},
		{int32(-1), "54 ff"}, {int32(128), "71 00000080"},
		{int64(127), "55 7f"}, {int64(-129), "81 ffffffffffffff7f"},
		{float32(1), "72 3f800000"}, {float64(1), "82 3ff0000000000000"},
		{Char('A'), "73 00000041"},
		{time.UnixMilli(1).UTC(), "83 0000000000000001"},
		{UUID{15: 1}, "98 00000000000000000000000000000001"},
		{[]byte{9}, "a0 01 09"}, {"ab", "a1 02 6162"}, {Symbol("ab"), "a3 02 6162"},
		{List{}, "45"}, {List{true}, "c0 02 01 41"},
		{Map{{Key: Symbol("a"), Value: uint32(0)}}, "c1 05 02 a30161 43"},
		{[]Symbol{"a", "b"}, "e0 06 02 a3 0161 0162"},
		{&Described{Descriptor: uint64(0x24), Value: List{}}, "00 53 24 45"},
		{&Described{Descriptor: Symbol("x"), Value: nil}, "00 a3 01 78 40"},
		{Fields{"b": int64(1), "a": nil}, "c1 0a 04 a30161 40 a30162 5501"},
		{Annotations{Symbol("s"): nil, uint64(1): nil}, "c1 08 04 5301 40 a30173 40"},
	} {
		if got := mustAppend(t, c.v); !bytes.Equal(got, hx(c.want)) {
			t.Errorf("Append(%#v) = % x, want %s", c.v, got, c.want)
		}
	}
	var b []byte
	b = AppendString(b, strings.Repeat("z", 256))
	if !bytes.Equal(b[:5], hx("b1 00000100")) {
		t.Errorf("str32 header = % x", b[:5])
	}
	long := List{[]byte(strings.Repeat("z", 260))}
	b = mustAppend(t, long)
	if !bytes.Equal(b[:9], hx("d0 0000010d 00000001")) {
		t.Errorf("list32 header = % x", b[:9])
	}
}

// TestDecodeVariants decodes every encoding of each type, including the
// ones this encoder never produces.
func TestDecodeVariants(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
	}{
		{"56 01", true}, {"56 00", false},
		{"43", uint32(0)}, {"52 07", uint32(7)}, {"70 00000007", uint32(7)},
		{"44", uint64(0)}, {"53 07", uint64(7)}, {"80 0000000000000007", uint64(7)},
		{"54 fe", int32(-2)}, {"71 fffffffe", int32(-2)},
		{"55 fe", int64(-2)}, {"81 fffffffffffffffe", int64(-2)},
		{"b0 00000002 0102", []byte{1, 2}}, {"b1 00000001 61", "a"}, {"b3 00000001 61", Symbol("a")},
		{"45", List{}}, {"c0 01 00", List{}}, {"d0 00000004 00000000", List{}},
		{"d0 00000006 00000002 4141", List{true, true}},
		{"c1 01 00", Map{}}, {"d1 00000006 00000002 4040", Map{{Key: nil, Value: nil}}},
		{"f0 00000007 00000002 52 0102", Array{Code: CodeSmallUint, Elems: []any{uint32(1), uint32(2)}}},
		{"e0 04 01 a3 01 78", Array{Code: CodeSym8, Elems: []any{Symbol("x")}}},
		{"e0 07 01 b3 00000001 78", Array{Code: CodeSym32, Elems: []any{Symbol("x")}}},
		{"e0 06 02 00 a3 01 78 45", Array{Code: CodeList0, Descriptor: Symbol("x"), Elems: []any{
			&Described{Descriptor: Symbol("x"), Value: List{}}, &Described{Descriptor: Symbol("x"), Value: List{}}}}},
		{"e0 02 01 40", Array{Code: CodeNull, Elems: []any{nil}}},
		{"00 80 0000000000000024 45", &Described{Descriptor: uint64(0x24), Value: List{}}},
		{"00 44 40", &Described{Descriptor: uint64(0), Value: nil}},
	} {
		d := NewDecoder(hx(c.in))
		got, err := d.ReadValue()
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s decoded to %#v, want %#v", c.in, got, c.want)
		}
		if d.Len() != 0 {
			t.Errorf("%s: %d bytes left", c.in, d.Len())
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	deep := strings.Repeat("c0 00 01 ", 0) // placeholder, built below
	_ = deep
	nested := make([]byte, 0, 3*70)
	for range 70 {
		nested = append(nested, CodeDescribed, CodeSmallUlong, 1)
	}
	nested = append(nested, CodeNull)
	for _, c := range []struct {
		name, in string
		raw      []byte
		want     string
		offset   int
	}{
		{name: "empty", in: "", want: "unexpected end of input", offset: 0},
		{name: "truncated uint", in: "70 0000", want: "uint needs 4 bytes, 2 left", offset: 1},
		{name: "str32 claims 4 GiB", in: "b1 ffffffff 61", want: "string of 4294967295 bytes exceeds the 1 bytes left", offset: 0},
		{name: "vbin8 too long", in: "a0 05 01", want: "binary of 5 bytes exceeds the 1 bytes left", offset: 0},
		{name: "list32 claims 4 GiB", in: "d0 ffffffff 00000001 40", want: "exceeds", offset: 0},
		{name: "list count beyond bytes", in: "d0 00000005 ffffffff 40", want: "claims 4294967295 elements in 1 bytes", offset: 0},
		{name: "list size below count", in: "d0 00000002 00000000", want: "smaller than its count field", offset: 0},
		{name: "list8 short elements", in: "c0 02 01 70", want: "uint needs 4 bytes, 0 left", offset: 4},
		{name: "list leftovers", in: "c0 03 01 40 40", want: "1 bytes left over", offset: 4},
		{name: "map odd", in: "c1 02 01 40", want: "odd number", offset: 0},
		{name: "zero-width array bomb", in: "f0 00000005 7fffffff 40", want: "array claims 2147483647 elements", offset: 9},
		{name: "zero-width count beyond body", in: "e0 02 05 41 30", want: "array claims 5 elements", offset: 3},
		{name: "array without constructor", in: "e0 01 00", want: "unexpected end of input", offset: 3},
		{name: "array unknown element", in: "e0 02 01 ff", want: "unknown array element format code 0xff", offset: 3},
		{name: "array double descriptor", in: "e0 05 01 00 44 00 44", want: "second descriptor", offset: 5},
		{name: "unknown code", in: "ff", want: "unknown format code 0xff", offset: 0},
		{name: "bad descriptor", in: "00 a1 01 78 40", want: "descriptor is string", offset: 1},
		{name: "deep nesting", raw: nested, want: "nesting deeper than 64", offset: 3 * 64},
	} {
		in := c.raw
		if in == nil {
			in = hx(c.in)
		}
		d := NewDecoder(in)
		_, err := d.ReadValue()
		var de *Error
		if !errors.As(err, &de) {
			t.Errorf("%s: got %v, want *Error", c.name, err)
			continue
		}
		if !strings.Contains(de.What, c.want) || de.Offset != c.offset {
			t.Errorf("%s: got %q at %d, want %q at %d", c.name, de.What, de.Offset, c.want, c.offset)
		}
	}
}

func TestDeepListNesting(t *testing.T) {
	// 100 nested list8s: the decoder must refuse at MaxDepth, not recurse on.
	var b []byte
	for i := 100; i > 0; i-- {
		b = append(b, CodeList8, byte(2*i+1), 1)
	}
	b = append(b, CodeNull)
	// fix sizes: each list holds the rest of the buffer after its header
	for i := range 100 {
		b[3*i+1] = byte(len(b) - 3*i - 2)
	}
	// sizes above 255 wrap; the decoder must still fail cleanly
	d := NewDecoder(b)
	if _, err := d.ReadValue(); err == nil {
		t.Fatal("ReadValue accepted 100 levels of nesting")
	}
	// A depth just within the limit decodes.
	var ok []byte
	for range MaxDepth {
		ok = append(ok, CodeDescribed, CodeUlong0)
	}
	ok = append(ok, CodeNull)
	d = NewDecoder(ok)
	if _, err := d.ReadValue(); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
}

func TestTypedReaders(t *testing.T) {
	for _, in := range []string{"43", "44", "50 07", "52 07", "53 07", "60 0007", "70 00000007", "80 0000000000000007"} {
		d := NewDecoder(hx(in))
		v, err := d.ReadUint32()
		if want := uint32(7); in == "43" || in == "44" {
			want = 0
			if v != want || err != nil {
				t.Errorf("ReadUint32(%s) = %d, %v", in, v, err)
			}
		} else if v != want || err != nil {
			t.Errorf("ReadUint32(%s) = %d, %v", in, v, err)
		}
	}
	d := NewDecoder(hx("80 0000000100000000"))
	if _, err := d.ReadUint32(); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("ReadUint32 of 2^32: %v", err)
	}
	d = NewDecoder(hx("a1 01 61"))
	if _, err := d.ReadUint32(); err == nil || !strings.Contains(err.Error(), "expected uint, found string (0xa1)") {
		t.Errorf("ReadUint32 of a string: %v", err)
	}
	if d.Pos() != 0 {
		t.Errorf("a type mismatch consumed %d bytes", d.Pos())
	}
	d = NewDecoder(hx("71 ffffff80 55 05 56 01"))
	if v, err := d.ReadInt32(); v != -128 || err != nil {
		t.Errorf("ReadInt32 = %d, %v", v, err)
	}
	if v, err := d.ReadInt64(); v != 5 || err != nil {
		t.Errorf("ReadInt64 = %d, %v", v, err)
	}
	if v, err := d.ReadBool(); !v || err != nil {
		t.Errorf("ReadBool = %v, %v", v, err)
	}
	d = NewDecoder(hx("56 02"))
	if _, err := d.ReadBool(); err == nil {
		t.Error("ReadBool accepted 0x56 0x02")
	}
	d = NewDecoder(hx("40 41"))
	if !d.ReadNull() || d.ReadNull() {
		t.Error("ReadNull misreported")
	}
}

func TestReadSymbolArray(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Symbol
		err  bool
	}{
		{in: "40", want: nil},
		{in: "a3 01 61", want: []Symbol{"a"}},
		{in: "b3 00000001 61", want: []Symbol{"a"}},
		{in: "e0 06 02 a3 0161 0162", want: []Symbol{"a", "b"}},
		{in: "e0 02 00 a3", want: []Symbol{}},
		{in: "e0 04 01 a1 01 61", err: true},
		{in: "a1 01 61", err: true},
	} {
		d := NewDecoder(hx(c.in))
		got, err := d.ReadSymbolArray()
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ReadSymbolArray(%s) = %#v, %v", c.in, got, err)
		}
	}
}

func TestReadFieldsAndAnnotations(t *testing.T) {
	f := Fields{"com.microsoft:timeout": uint32(5), "x": &Described{Descriptor: uint64(1), Value: "s"}}
	b, err := AppendFields(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(b)
	got, err := d.ReadFields()
	if err != nil || !reflect.DeepEqual(got, f) {
		t.Errorf("ReadFields = %#v, %v", got, err)
	}
	a := Annotations{Symbol("x-opt-sequence-number"): int64(1), uint64(7): "n"}
	b, err = AppendAnnotations(nil, a)
	if err != nil {
		t.Fatal(err)
	}
	d = NewDecoder(b)
	gotA, err := d.ReadAnnotations()
	if err != nil || !reflect.DeepEqual(gotA, a) {
		t.Errorf("ReadAnnotations = %#v, %v", gotA, err)
	}
	d = NewDecoder(hx("c1 04 02 5501 40"))
	if _, err := d.ReadFields(); err == nil || !strings.Contains(err.Error(), "fields key is long") {
		t.Errorf("ReadFields with a long key: %v", err)
	}
	if _, err := AppendAnnotations(nil, Annotations{"str": 1}); err == nil {
		t.Error("AppendAnnotations accepted a string key")
	}
	// A map with a string key (a1 01 6b "k" -> 54 01, smallint 1), as the
	// Java SDK writes a modified outcome's annotations: refused by
	// ReadAnnotations, read with a symbol key by ReadStringKeyedAnnotations.
	stringKeyed := hx("c1 06 02 a1016b 5401")
	d = NewDecoder(stringKeyed)
	if _, err := d.ReadAnnotations(); err == nil || !strings.Contains(err.Error(), "annotations key is string") {
		t.Errorf("ReadAnnotations with a string key: %v", err)
	}
	d = NewDecoder(stringKeyed)
	gotA, err = d.ReadStringKeyedAnnotations()
	if want := (Annotations{Symbol("k"): int32(1)}); err != nil || !reflect.DeepEqual(gotA, want) {
		t.Errorf("ReadStringKeyedAnnotations = %#v, %v; want %#v", gotA, err, want)
	}
	d = NewDecoder(hx("c1 04 02 5501 40"))
	if _, err := d.ReadStringKeyedAnnotations(); err == nil || !strings.Contains(err.Error(), "annotations key is long") {
		t.Errorf("ReadStringKeyedAnnotations with a long key: %v", err)
	}
}

func TestReadListAndDescriptor(t *testing.T) {
	b := AppendDescriptor(nil, 0x14)
	b, start := BeginList(b)
	b = AppendUint(b, 3)
	b = AppendString(b, "x")
	b = EndList(b, start, 2)
	b = append(b, 0xAA) // trailing payload
	d := NewDecoder(b)
	code, sym, err := d.ReadDescriptor()
	if code != 0x14 || sym != nil || err != nil {
		t.Fatalf("ReadDescriptor = %d %q %v", code, sym, err)
	}
	c, n, err := d.ReadList()
	if n != 2 || err != nil {
		t.Fatalf("ReadList = %d, %v", n, err)
	}
	if v, _ := c.ReadUint32(); v != 3 {
		t.Errorf("first element %d", v)
	}
	if s, _ := c.ReadString(); s != "x" || c.Len() != 0 {
		t.Errorf("second element %q, %d left", s, c.Len())
	}
	if !bytes.Equal(d.Rest(), []byte{0xAA}) {
		t.Errorf("rest = %x", d.Rest())
	}
	// Offsets in a child are absolute.
	d = NewDecoder(hx("c0 03 01 70 00"))
	c, _, err = d.ReadList()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReadUint32()
	var de *Error
	if !errors.As(err, &de) || de.Offset != 4 {
		t.Errorf("child error %v, want offset 4", err)
	}
	d = NewDecoder(hx("00 a3 0e 616d71703a6f70656e3a6c697374 45"))
	if code, sym, err := d.ReadDescriptor(); code != 0 || string(sym) != "amqp:open:list" || err != nil {
		t.Errorf("symbolic descriptor = %d %q %v", code, sym, err)
	}
}

func TestEncodeErrors(t *testing.T) {
	for _, v := range []any{
		struct{}{},
		List{make(chan int)},
		&Described{Descriptor: "string", Value: nil},
		Array{Elems: []any{}},
		Array{Code: CodeUint, Elems: []any{"x"}},
		Array{Code: CodeSmallUint, Elems: []any{uint32(300)}},
		Array{Code: CodeTrue, Elems: []any{false}},
		Array{Code: CodeNull, Elems: []any{nil, nil, nil}},
	} {
		if _, err := Append(nil, v); err == nil {
			t.Errorf("Append(%#v) succeeded", v)
		}
	}
	deep := any(nil)
	for range MaxDepth + 2 {
		deep = List{deep}
	}
	if _, err := Append(nil, deep); err == nil {
		t.Error("Append of a too-deep list succeeded")
	}
	cyclic := Fields{}
	cyclic["self"] = cyclic
	if _, err := Append(nil, cyclic); err == nil {
		t.Error("Append of a cyclic fields map succeeded")
	}
}

func TestArrayWidening(t *testing.T) {
	long := Symbol(strings.Repeat("s", 300))
	b := mustAppend(t, Array{Code: CodeSym8, Elems: []any{Symbol("a"), long}})
	d := NewDecoder(b)
	v, err := d.ReadValue()
	if err != nil {
		t.Fatal(err)
	}
	if a := v.(Array); a.Code != CodeSym32 || a.Elems[1] != long {
		t.Errorf("widened array = code 0x%02x", a.Code)
	}
	big := List{strings.Repeat("q", 300)}
	b = mustAppend(t, Array{Code: CodeList8, Elems: []any{big}})
	d = NewDecoder(b)
	if v, err = d.ReadValue(); err != nil || v.(Array).Code != CodeList32 || !reflect.DeepEqual(v.(Array).Elems[0], big) {
		t.Errorf("widened list array = %#v, %v", v, err)
	}
	// Inferred element codes.
	b = mustAppend(t, []string{"a", "b"})
	if !bytes.Equal(b, hx("e0 06 02 a1 0161 0162")) {
		t.Errorf("[]string = % x", b)
	}
	b = mustAppend(t, Array{Elems: []any{uint64(1)}})
	if !bytes.Equal(b, hx("e0 0a 01 80 0000000000000001")) {
		t.Errorf("inferred ulong array = % x", b)
	}
}

func TestScalarReadsDoNotAllocate(t *testing.T) {
	var b []byte
	b = AppendUint(b, 70000)
	b = AppendUlong(b, 1<<40)
	b = AppendBool(b, true)
	b = AppendLong(b, -5)
	b = AppendBinary(b, []byte("tag"))
	b = AppendSymbol(b, "sym")
	b = AppendTimestampMillis(b, 99)
	b = AppendDescriptor(b, 0x14)
	b, s := BeginList(b)
	b = AppendNull(b)
	b = EndList(b, s, 1)
	allocs := testing.AllocsPerRun(100, func() {
		d := NewDecoder(b)
		_, _ = d.ReadUint32()
		_, _ = d.ReadUint64()
		_, _ = d.ReadBool()
		_, _ = d.ReadInt64()
		_, _ = d.ReadBinary()
		_, _ = d.ReadSymbolBytes()
		_, _ = d.ReadTimestampMillis()
		_, _, _ = d.ReadDescriptor()
		c, _, _ := d.ReadList()
		c.ReadNull()
		if d.Len() != 0 {
			panic("left over")
		}
	})
	if allocs != 0 {
		t.Errorf("scalar reads allocated %v times", allocs)
	}
}

// AppendBinaryHeader followed by the bytes is AppendBinary, on both sides
// of the one-byte length.
func TestAppendBinaryHeader(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 70000} {
		v := bytes.Repeat([]byte{7}, n)
		got := append(AppendBinaryHeader([]byte{0x40}, n), v...)
		want := AppendBinary([]byte{0x40}, v)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: header+bytes %x…, AppendBinary %x…", n, got[:min(len(got), 8)], want[:min(len(want), 8)])
		}
		d := NewDecoder(got[1:])
		if b, err := d.ReadBinary(); err != nil || len(b) != n {
			t.Fatalf("%d bytes: read back %d bytes, err %v", n, len(b), err)
		}
	}
}
