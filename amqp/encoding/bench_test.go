package encoding

import "testing"

func BenchmarkReadUint32(b *testing.B) {
	buf := AppendUint(nil, 70000)
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(buf)
		if _, err := d.ReadUint32(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendValueList(b *testing.B) {
	v := List{uint32(1), "a string", Symbol("sym"), int64(-5), true, []byte("bin"), Map{{Key: Symbol("k"), Value: "v"}}}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = Append(buf[:0], v)
	}
}

func BenchmarkReadValueList(b *testing.B) {
	v := List{uint32(1), "a string", Symbol("sym"), int64(-5), true, []byte("bin"), Map{{Key: Symbol("k"), Value: "v"}}}
	buf, _ := Append(nil, v)
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(buf)
		if _, err := d.ReadValue(); err != nil {
			b.Fatal(err)
		}
	}
}
