package servicebus

import (
	"errors"
	"testing"
)

var errTwinGone = errors.New("twin gone")

// The interleavings of a forwarded receiver's credit with the client's
// flows: the twin never holds more credit than the client gave and has not
// used, and a flow held back while a delivery was in transit is made up
// when it is counted as sent (fwdRecv.forward then matches the credit).
func TestRelayCredit(t *testing.T) {
	var c relayCredit
	client := 0 // the client's credit on its link
	match := func(step string, want int) {
		t.Helper()
		issued := 0
		c.grant(client, func(n uint32) error { issued += int(n); return nil })
		if issued != want {
			t.Fatalf("%s: gave the twin %d credit, want %d", step, issued, want)
		}
	}
	client = 1
	match("the client's first flow", 1)

	// 1. The twin delivers; the client's flow comes before the client's
	// link sends the delivery, so its credit is not used yet.
	if !c.take() {
		t.Fatal("take: the twin's credit was not counted")
	}
	match("a flow while the delivery is in transit", 0) // 1 would lock a message nobody asked for
	client--                                            // the client's link sends it
	c.sent()
	match("after the send", 0)

	// 2. The client's flow comes after its link sent the delivery but
	// before the delivery is counted as sent: held back, then made up.
	client = 1
	match("the next flow", 1)
	if !c.take() {
		t.Fatal("take: the twin's credit was not counted")
	}
	client-- // the client's link sends it
	client++ // the client asks for one more
	match("a flow between the send and its count", 0)
	c.sent()
	match("the count of the send", 1)

	// Credit the twin refused is not counted as issued.
	asked := 0
	c.grant(client+1, func(n uint32) error { asked = int(n); return errTwinGone })
	if asked != 1 || c.issued != 1 {
		t.Fatalf("a refused grant: asked the twin for %d, counted %d issued; want 1 and the 1 from before", asked, c.issued)
	}

	// Without credit on the twin (a drain's leftovers), nothing is counted.
	c = relayCredit{}
	if c.take() {
		t.Fatal("take counted a delivery the twin had no credit for")
	}
}
