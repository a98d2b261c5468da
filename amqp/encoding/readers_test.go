package encoding

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// TestTypedReaderTable runs every typed reader over a valid input, a value
// of the wrong type (which must be refused without consuming anything) and
// a truncated input.
func TestTypedReaderTable(t *testing.T) {
	ts := time.UnixMilli(1234).UTC()
	for _, c := range []struct {
		name  string
		read  func(*Decoder) (any, error)
		in    []byte
		want  any
		wrong []byte
	}{
		{"Uint8", func(d *Decoder) (any, error) { return d.ReadUint8() }, hx("50 ff"), uint8(255), hx("52 ff")[:0]},
		{"Uint8 range", func(d *Decoder) (any, error) { return d.ReadUint8() }, hx("52 07"), uint8(7), hx("60 0100")},
		{"Uint16", func(d *Decoder) (any, error) { return d.ReadUint16() }, hx("60 0102"), uint16(258), hx("70 00010000")},
		{"Uint64", func(d *Decoder) (any, error) { return d.ReadUint64() }, hx("80 0102030405060708"), uint64(0x0102030405060708), hx("55 01")},
		{"Int64 short", func(d *Decoder) (any, error) { return d.ReadInt64() }, hx("61 fffe"), int64(-2), hx("80 0000000000000001")},
		{"Int64 byte", func(d *Decoder) (any, error) { return d.ReadInt64() }, hx("51 80"), int64(-128), hx("43")},
		{"Int64 int", func(d *Decoder) (any, error) { return d.ReadInt64() }, hx("71 80000000"), int64(-2147483648), hx("41")},
		{"Int32 range", func(d *Decoder) (any, error) { return d.ReadInt32() }, hx("54 01"), int32(1), hx("81 0000000100000000")},
		{"Bool", func(d *Decoder) (any, error) { return d.ReadBool() }, hx("42"), false, hx("43")},
		{"TimestampMillis", func(d *Decoder) (any, error) { return d.ReadTimestampMillis() }, hx("83 00000000000004d2"), int64(1234), hx("81 00000000000004d2")},
		{"Timestamp", func(d *Decoder) (any, error) { return d.ReadTimestamp() }, hx("83 00000000000004d2"), ts, hx("40")},
		{"UUID", func(d *Decoder) (any, error) { return d.ReadUUID() }, append(hx("98"), make([]byte, 16)...), UUID{}, hx("a0 10")},
		{"Binary", func(d *Decoder) (any, error) { return d.ReadBinary() }, hx("b0 00000001 07"), []byte{7}, hx("a1 01 07")},
		{"String", func(d *Decoder) (any, error) { return d.ReadString() }, hx("a1 02 6869"), "hi", hx("a3 02 6869")},
		{"Symbol", func(d *Decoder) (any, error) { return d.ReadSymbol() }, hx("a3 02 6869"), Symbol("hi"), hx("a1 02 6869")},
		{"Map", func(d *Decoder) (any, error) { _, n, err := d.ReadMap(); return n, err }, hx("c1 03 02 40 40"), 1, hx("c0 01 00")},
		{"List", func(d *Decoder) (any, error) { _, n, err := d.ReadList(); return n, err }, hx("c0 01 00"), 0, hx("c1 01 00")},
		{"Descriptor", func(d *Decoder) (any, error) { c, _, err := d.ReadDescriptor(); return c, err }, hx("00 80 0000000000000070"), uint64(0x70), hx("45")},
		{"Annotations null", func(d *Decoder) (any, error) { return d.ReadAnnotations() }, hx("40"), Annotations(nil), hx("c0 01 00")},
		{"Fields null", func(d *Decoder) (any, error) { return d.ReadFields() }, hx("40"), Fields(nil), hx("45")},
		{"SymbolArray", func(d *Decoder) (any, error) { return d.ReadSymbolArray() }, hx("e0 04 01 a3 01 78"), []Symbol{"x"}, hx("c0 01 00")},
	} {
		d := NewDecoder(c.in)
		got, err := c.read(&d)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s(% x) = %#v, %v; want %#v", c.name, c.in, got, err, c.want)
		}
		if c.name != "Map" && c.name != "List" && c.name != "Descriptor" && d.Len() != 0 {
			t.Errorf("%s left %d bytes", c.name, d.Len())
		}
		if len(c.wrong) > 0 {
			d = NewDecoder(c.wrong)
			if _, err := c.read(&d); err == nil {
				t.Errorf("%s accepted % x", c.name, c.wrong)
			} else if d.Pos() != 0 && !bytes.Contains([]byte(err.Error()), []byte("out of range")) {
				t.Errorf("%s consumed %d bytes of a refused value", c.name, d.Pos())
			}
		}
		if len(c.in) > 1 {
			d = NewDecoder(c.in[:len(c.in)-1])
			if _, err := c.read(&d); err == nil {
				t.Errorf("%s accepted truncated % x", c.name, c.in[:len(c.in)-1])
			}
		}
		d = NewDecoder(nil)
		if _, err := c.read(&d); err == nil {
			t.Errorf("%s accepted empty input", c.name)
		}
	}
}

func TestDecoderHelpers(t *testing.T) {
	b := AppendStringBytes(nil, []byte("abc"))
	b = AppendDescriptor(b, 1)
	b = AppendNull(b)
	var d Decoder
	d.Reset(b)
	if v, err := d.SkipValueBytes(); err != nil || !bytes.Equal(v, hx("a1 03 616263")) {
		t.Errorf("SkipValueBytes = % x, %v", v, err)
	}
	if !d.IsDescribed() || d.Offset() != 5 {
		t.Errorf("IsDescribed %v at %d", d.IsDescribed(), d.Offset())
	}
	if err := d.Skip(); err != nil || d.Len() != 0 {
		t.Errorf("Skip of a described null: %v, %d left", err, d.Len())
	}
	if _, err := d.Peek(); err == nil {
		t.Error("Peek at the end succeeded")
	}
	for _, in := range []string{"b1 000000", "c0", "d0 00000005 00", "00 53", "ee"} {
		d = NewDecoder(hx(in))
		if err := d.Skip(); err == nil {
			t.Errorf("Skip(%s) succeeded", in)
		}
	}
}

func TestInferredArrayCodes(t *testing.T) {
	ts := time.UnixMilli(7).UTC()
	for _, e := range []any{true, uint8(1), uint16(1), uint32(1), uint64(1), int8(1), int16(1), int32(1), int64(1),
		float32(1), float64(1), Decimal32{}, Decimal64{}, Decimal128{}, Char('x'), ts, UUID{}, []byte{1}, "s",
		Symbol("y"), List{int64(1)}, Map{{Key: "k", Value: "v"}}, Array{Code: CodeUint, Elems: []any{uint32(1)}}} {
		b, err := Append(nil, Array{Elems: []any{e, e}})
		if err != nil {
			t.Errorf("array of %T: %v", e, err)
			continue
		}
		d := NewDecoder(b)
		v, err := d.ReadValue()
		if err != nil || !reflect.DeepEqual(v.(Array).Elems, []any{e, e}) {
			t.Errorf("array of %T decoded to %#v, %v", e, v, err)
		}
	}
	if _, err := Append(nil, Array{Elems: []any{nil}}); err == nil {
		t.Error("inferred an array code for nil")
	}
}
