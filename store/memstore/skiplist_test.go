package memstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSkiplistAgainstModel drives a large skiplist (tall towers) with random
// sets, deletes and range deletes and compares it with a sorted model after
// every step: order, length and tower links at every level.
func TestSkiplistAgainstModel(t *testing.T) {
	l := newSkiplist()
	m := map[string]string{}
	rng := rand.New(rand.NewPCG(3, 5))
	k := func() string { return fmt.Sprintf("%06d", rng.IntN(20000)) }
	for step := range 30000 {
		switch r := rng.IntN(100); {
		case r < 70:
			key, val := k(), fmt.Sprint(step)
			l.set([]byte(key), []byte(val))
			m[key] = val
		case r < 95:
			key := k()
			l.delete([]byte(key))
			delete(m, key)
		default:
			lo := k()
			hi := lo[:4] + "99" // up to 100 keys
			l.deleteRange([]byte(lo), []byte(hi))
			for key := range m {
				if key >= lo && key < hi {
					delete(m, key)
				}
			}
		}
		if step%5000 == 4999 {
			checkList(t, l, m)
		}
	}
	checkList(t, l, m)
}

func checkList(t *testing.T, l *skiplist, m map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	if l.len != len(keys) {
		t.Fatalf("len = %d, model has %d", l.len, len(keys))
	}
	i := 0
	for n := l.first(); n != nil; n = n.next[0] {
		if i >= len(keys) || string(n.key) != keys[i] || string(n.value) != m[keys[i]] {
			t.Fatalf("entry %d is %q=%q, want %q", i, n.key, n.value, keys[i])
		}
		i++
	}
	// Every level is a sorted sub-list of level 0, and get finds every key.
	for lvl := range l.level {
		var prev []byte
		for n := l.head.next[lvl]; n != nil; n = n.next[lvl] {
			if prev != nil && string(prev) >= string(n.key) {
				t.Fatalf("level %d out of order: %q then %q", lvl, prev, n.key)
			}
			if l.get(n.key) != n {
				t.Fatalf("level %d links %q, which get does not find", lvl, n.key)
			}
			prev = n.key
		}
	}
	if l.level > 1 && l.head.next[l.level-1] == nil {
		t.Fatalf("top level %d is empty", l.level)
	}
}
