package broker

// The queue keeps its locked messages and its locked sessions in lists
// sorted by lock expiry, threaded through the nodes' own link fields (a
// message's are in its msgLock, which exists while it is locked). Expiry times almost always grow, so an insert is
// normally an append. lockNode is what a node of such a list provides.
type lockNode[T any] interface {
	*T
	// links returns the node's previous and next pointers.
	links() (prev, next **T)
	// expiry is the sort key: the lock's expiry in Unix nanoseconds.
	expiry() int64
}

func (m *msgIdx) links() (prev, next **msgIdx)   { return &m.lk.prev, &m.lk.next }
func (m *msgIdx) expiry() int64                  { return m.lk.until }
func (s *session) links() (prev, next **session) { return &s.lprev, &s.lnext }
func (s *session) expiry() int64                 { return s.lockedUntil }

// linkSorted inserts n into the list (head, tail) after every node that
// expires no later than n, and reports whether n became the head.
func linkSorted[T any, P lockNode[T]](head, tail **T, n P) bool {
	self := (*T)(n)
	at := *tail
	for at != nil && P(at).expiry() > n.expiry() {
		prev, _ := P(at).links()
		at = *prev
	}
	np, nn := n.links()
	*np = at
	if at == nil {
		*nn = *head
		*head = self
	} else {
		_, atNext := P(at).links()
		*nn = *atNext
		*atNext = self
	}
	if *nn == nil {
		*tail = self
	} else {
		nextPrev, _ := P(*nn).links()
		*nextPrev = self
	}
	return *head == self
}

// unlinkSorted removes n from the list (head, tail); a node that is not in
// the list is left alone.
func unlinkSorted[T any, P lockNode[T]](head, tail **T, n P) {
	self := (*T)(n)
	np, nn := n.links()
	if *np == nil {
		if *head != self {
			return
		}
		*head = *nn
	} else {
		_, prevNext := P(*np).links()
		*prevNext = *nn
	}
	if *nn == nil {
		*tail = *np
	} else {
		nextPrev, _ := P(*nn).links()
		*nextPrev = *np
	}
	*np, *nn = nil, nil
}
