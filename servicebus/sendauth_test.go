package servicebus

import (
	"testing"
	"time"

	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/sas"
)

// A sender link checks the connection's claims once, and again only when
// a put-token changed them or the claim that allowed its sends expired.
func TestSendAuthFollowsClaims(t *testing.T) {
	auth, err := sas.NewAuthorizer([]sas.Rule{{KeyName: "root", PrimaryKey: "k", Rights: sas.Manage | sas.Send | sas.Listen}})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1_900_000_000, 0))
	c := &conn{h: &Handler{auth: auth, clk: clk}, claims: map[string]claim{}}
	var a sendAuth
	if err := a.check(c, "q"); err == nil {
		t.Fatal("a send without any claim was allowed")
	}
	c.setClaim("q", claim{rights: sas.Send, expires: clk.Now().Add(time.Minute)})
	if err := a.check(c, "q"); err != nil {
		t.Fatalf("a send under a valid claim: %v", err)
	}
	// The second check answers from what it remembers: with the claims
	// emptied behind its back (no setClaim, so no new generation), a
	// check that read them again would refuse.
	saved := c.claims
	c.claims = map[string]claim{}
	if err := a.check(c, "q"); err != nil {
		t.Fatalf("the second send was checked against the claims again: %v", err)
	}
	c.claims = saved
	clk.Advance(time.Minute)
	if err := a.check(c, "q"); err == nil {
		t.Fatal("a send was allowed after its claim expired")
	}
	c.setClaim("q", claim{rights: sas.Send}) // a new token, no expiry
	if err := a.check(c, "q"); err != nil {
		t.Fatalf("a send under the new claim: %v", err)
	}
	c.setClaim("q", claim{rights: sas.Listen}) // replaced by one that cannot send
	if err := a.check(c, "q"); err == nil {
		t.Fatal("a send was allowed after its claim lost the Send right")
	}
}
