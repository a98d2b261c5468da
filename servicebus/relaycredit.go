package servicebus

// relayCredit keeps a forwarded receiver's credit on the owner's twin in
// step with the client's: the twin may hold at most the credit the client
// gave and that no delivery has used yet. A delivery counts from when it
// leaves the twin until it has used the client's credit (in transit): a
// client flow that comes in between sees the client's credit not yet used
// and the twin's already used, and counting neither would give the twin one
// credit too many, a message locked for a client that did not ask for it.
type relayCredit struct {
	issued    int // credit given to the twin and not used by a delivery
	inTransit int // deliveries taken from the twin, not yet sent to the client
}

// grant gives the twin, through issue, the credit it lacks when the client
// has credit client, and counts it once issued.
func (c *relayCredit) grant(client int, issue func(uint32) error) {
	want := client - c.issued - c.inTransit
	if want <= 0 || issue(uint32(want)) != nil {
		return
	}
	c.issued += want
}

// take counts a delivery from the twin; false when none of the twin's
// credit was counted (a drain's leftovers after the count was reset).
func (c *relayCredit) take() bool {
	if c.issued == 0 {
		return false
	}
	c.issued--
	c.inTransit++
	return true
}

// sent counts a taken delivery as sent to the client (or dropped with the
// link).
func (c *relayCredit) sent() { c.inTransit-- }
