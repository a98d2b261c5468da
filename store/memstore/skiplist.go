package memstore

import (
	"bytes"
	"math/rand/v2"
)

// maxLevel bounds the tower height. With a branching factor of 4 it keeps
// searches logarithmic up to about 4^maxLevel keys, far beyond what an
// in-memory test store holds.
const maxLevel = 20

// node is one key of the skiplist. Its value slice is never modified in
// place: an overwrite stores a new slice, so a value handed to a reader under
// the lock stays intact after the lock is released.
type node struct {
	key   []byte
	value []byte
	next  []*node // next[i] is the successor at level i
}

// skiplist is an ordered map from byte strings to byte strings, compared
// bytewise. It is not safe for concurrent use; the Store guards it.
type skiplist struct {
	head  node // sentinel; its key is never compared
	level int  // number of levels in use, at least 1
	len   int
	rng   *rand.Rand
}

func newSkiplist() *skiplist {
	l := &skiplist{level: 1, rng: rand.New(rand.NewPCG(1, 2))}
	l.head.next = make([]*node, maxLevel)
	return l
}

// randomLevel draws a tower height: level i+1 with probability 4^-i.
func (l *skiplist) randomLevel() int {
	lvl := 1
	for lvl < maxLevel && l.rng.Uint32()&3 == 0 {
		lvl++
	}
	return lvl
}

// findGE returns the first node whose key is >= key, or nil. When prev is not
// nil it receives, for each level, the last node whose key is < key.
func (l *skiplist) findGE(key []byte, prev *[maxLevel]*node) *node {
	x := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for n := x.next[i]; n != nil && bytes.Compare(n.key, key) < 0; n = x.next[i] {
			x = n
		}
		if prev != nil {
			prev[i] = x
		}
	}
	return x.next[0]
}

// first returns the smallest node, or nil when the list is empty.
func (l *skiplist) first() *node { return l.head.next[0] }

// get returns the node holding key, or nil.
func (l *skiplist) get(key []byte) *node {
	n := l.findGE(key, nil)
	if n != nil && bytes.Equal(n.key, key) {
		return n
	}
	return nil
}

// set stores value under key. The skiplist takes ownership of both slices.
func (l *skiplist) set(key, value []byte) {
	var prev [maxLevel]*node
	n := l.findGE(key, &prev)
	if n != nil && bytes.Equal(n.key, key) {
		n.value = value
		return
	}
	lvl := l.randomLevel()
	for i := l.level; i < lvl; i++ {
		prev[i] = &l.head
	}
	if lvl > l.level {
		l.level = lvl
	}
	n = &node{key: key, value: value, next: make([]*node, lvl)}
	for i := range lvl {
		n.next[i] = prev[i].next[i]
		prev[i].next[i] = n
	}
	l.len++
}

// delete removes key if present.
func (l *skiplist) delete(key []byte) {
	var prev [maxLevel]*node
	n := l.findGE(key, &prev)
	if n == nil || !bytes.Equal(n.key, key) {
		return
	}
	l.unlink(n, &prev)
}

// deleteRange removes every key in [start, end).
func (l *skiplist) deleteRange(start, end []byte) {
	var prev [maxLevel]*node
	n := l.findGE(start, &prev)
	// Removing nodes at or after start leaves prev valid: prev[i] is still
	// the last node below start at level i, now linked to the next survivor.
	for n != nil && bytes.Compare(n.key, end) < 0 {
		l.unlink(n, &prev)
		n = prev[0].next[0]
	}
}

// unlink removes n, whose predecessors at each level are in prev.
func (l *skiplist) unlink(n *node, prev *[maxLevel]*node) {
	for i := range n.next {
		prev[i].next[i] = n.next[i]
	}
	for l.level > 1 && l.head.next[l.level-1] == nil {
		l.level--
	}
	l.len--
}
