package broker

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

// Every Broker method that takes a context honours it: called with a
// cancelled one, it returns the context's error (and, as the atomicity
// tests show for the mutating ones, applies nothing).
func TestEveryMethodTakingAContextHonoursIt(t *testing.T) {
	e := newEnv(t)
	e.queue("q", QueueProperties{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	bv := reflect.ValueOf(e.b)
	bt := bv.Type()
	n := 0
	for i := range bt.NumMethod() {
		m := bt.Method(i)
		ft := m.Type // receiver first
		if ft.NumIn() < 2 || ft.In(1) != ctxType {
			continue
		}
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 2; j < ft.NumIn(); j++ {
			if ft.IsVariadic() && j == ft.NumIn()-1 {
				break
			}
			args = append(args, reflect.Zero(ft.In(j)))
		}
		out := bv.Method(i).Call(args)
		var err error
		if last := out[len(out)-1]; last.Type() == errType {
			err, _ = last.Interface().(error)
		} else if p, ok := last.Interface().(*Pending); ok { // SendAsync
			_, err = p.Wait()
		} else {
			t.Fatalf("%s returns no error", m.Name)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", m.Name, err)
		}
		n++
	}
	if n < 40 {
		t.Fatalf("checked %d methods; expected every context-taking method (40 or more)", n)
	}
}
