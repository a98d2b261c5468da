package filter

import (
	"testing"
	"time"
)

// benchMsg is a message with 10 application properties and a few system
// properties, stored as a broker would: maps of already-decoded values.
type benchMsg struct {
	user map[string]any
	sys  map[string]any
}

func (m *benchMsg) UserProperty(name string) (any, bool) {
	v, ok := m.user[name]
	return v, ok
}

func (m *benchMsg) SystemProperty(name string) (any, bool) {
	v, ok := m.sys[name]
	return v, ok
}

func (m *benchMsg) SetUserProperty(name string, v any)         { m.user[name] = v }
func (m *benchMsg) DeleteUserProperty(name string)             { delete(m.user, name) }
func (m *benchMsg) SetSystemProperty(name string, v any) error { m.sys[name] = v; return nil }

func newBenchMsg() *benchMsg {
	return &benchMsg{
		user: map[string]any{
			"color": "red", "quantity": int32(15), "price": 9.99, "region": "eu-west",
			"customer": "c-12345", "priority": int64(3), "express": true,
			"weight": float32(1.25), "sku": "SKU-000123", "created": time.Unix(1700000000, 0),
		},
		sys: map[string]any{"Label": "order.created", "MessageId": "m-1", "SequenceNumber": int64(42)},
	}
}

func benchFilter(b *testing.B, expr string, want bool) {
	f, err := ParseSQL(expr)
	if err != nil {
		b.Fatal(err)
	}
	m := newBenchMsg()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ok, err := f.Match(m)
		if err != nil || ok != want {
			b.Fatalf("Match = %v, %v", ok, err)
		}
	}
}

func BenchmarkMatchTypical(b *testing.B) {
	benchFilter(b, "color = 'red' AND quantity > 10", true)
}

func BenchmarkMatchComplex(b *testing.B) {
	benchFilter(b, "(region LIKE 'eu-%' OR region = 'us') AND priority IN (1, 2, 3) AND price * 2 < 20.5 AND sys.Label = 'order.created' AND NOT express = FALSE", true)
}

func BenchmarkMatchLike(b *testing.B) {
	benchFilter(b, "sku LIKE 'SKU-%3'", true)
}

func BenchmarkMatchMissingProperty(b *testing.B) {
	benchFilter(b, "missing = 'x' OR color = 'blue'", false)
}

func BenchmarkMatchCorrelation(b *testing.B) {
	f := &CorrelationFilter{Subject: "order.created", Properties: map[string]any{"color": "red"}}
	m := newBenchMsg()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := f.Match(m); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParseSQL(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSQL("color = 'red' AND quantity > 10"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkActionApply(b *testing.B) {
	a, err := ParseAction("SET quantity = quantity + 1; SET sys.Label = 'routed'; REMOVE sku")
	if err != nil {
		b.Fatal(err)
	}
	m := newBenchMsg()
	b.ReportAllocs()
	for b.Loop() {
		m.user["sku"] = "x"
		if err := a.Apply(m); err != nil {
			b.Fatal(err)
		}
	}
}
