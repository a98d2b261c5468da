package filter_test

import (
	"fmt"

	"github.com/busbar-io/busbar/broker/filter"
)

// message is a minimal filter.MutableMessage.
type message struct {
	sys  map[string]any
	user map[string]any
}

func (m *message) SystemProperty(name string) (any, bool) {
	canon, _ := filter.CanonicalSystemProperty(name)
	v, ok := m.sys[canon]
	return v, ok
}

func (m *message) UserProperty(name string) (any, bool) {
	v, ok := m.user[name]
	return v, ok
}

func (m *message) SetUserProperty(name string, v any) { m.user[name] = v }
func (m *message) DeleteUserProperty(name string)     { delete(m.user, name) }
func (m *message) SetSystemProperty(name string, v any) error {
	m.sys[name] = v
	return nil
}

func ExampleParseSQL() {
	f, err := filter.ParseSQL("color = 'red' and quantity > @min")
	if err != nil {
		panic(err)
	}
	f = f.WithParameters(map[string]any{"@min": int64(10)})
	m := &message{
		sys:  map[string]any{"Label": "order"},
		user: map[string]any{"color": "red", "quantity": int32(15)},
	}
	ok, err := f.Match(m)
	fmt.Println(f, ok, err)
	// Output: color = 'red' AND quantity > @min true <nil>
}

func ExampleParseSQL_error() {
	_, err := filter.ParseSQL("color = 'red' AND\nquantity >")
	fmt.Println(err)
	// Output: line 2, column 11 (offset 28): expected an expression, found end of expression
}

func ExampleAction_Apply() {
	a, err := filter.ParseAction("SET quantity = quantity + 1; SET sys.Label = 'routed'; REMOVE color")
	if err != nil {
		panic(err)
	}
	m := &message{
		sys:  map[string]any{"Label": "order"},
		user: map[string]any{"color": "red", "quantity": int32(15)},
	}
	if err := a.Apply(m); err != nil {
		panic(err)
	}
	fmt.Printf("%T %v %v %v\n", m.user["quantity"], m.user["quantity"], m.sys["Label"], len(m.user))
	// Output: int32 16 routed 1
}
