package servicebus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/busbar-io/busbar/amqp"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/sas"
)

// claim is what one accepted token (or SASL PLAIN login) grants on a
// connection: rights on an entity path and everything below it.
type claim struct {
	rights  sas.Right
	expires time.Time // zero: never
}

// covers reports whether a claim on prefix applies to path (both
// normalized): the namespace covers everything, a topic its subscriptions.
func covers(prefix, path string) bool {
	return prefix == "" || prefix == path || strings.HasPrefix(path, prefix+"/")
}

// authorize checks that the connection holds an unexpired claim with right
// on entity (an Address.Entity). Without an Authorizer everything is allowed.
func (c *conn) authorize(entity string, right sas.Right) error {
	_, err := c.authorizeUntil(entity, right)
	return err
}

// authorizeUntil is authorize that also says until when the claim it
// found holds (zero: no expiry, or no authentication at all).
func (c *conn) authorizeUntil(entity string, right sas.Right) (time.Time, error) {
	if c.h.auth == nil {
		return time.Time{}, nil
	}
	path := sas.NormalizePath(entity)
	now := c.h.clk.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, cl := range c.claims {
		if cl.rights&right != 0 && covers(p, path) && (cl.expires.IsZero() || now.Before(cl.expires)) {
			return cl.expires, nil
		}
	}
	return time.Time{}, unauthorized(right.String())
}

// setClaim records a claim a put-token established.
func (c *conn) setClaim(entity string, cl claim) {
	c.mu.Lock()
	c.claims[entity] = cl
	c.claimsGen.Add(1)
	c.mu.Unlock()
}

// sendAuth remembers a sender link's last authorization, so that a
// delivery is checked against the connection's claims only when they
// changed (claimsGen) or the claim that allowed the last one expired.
type sendAuth struct {
	ok    bool
	gen   uint64
	until time.Time
}

// check authorizes a send to entity on c.
func (a *sendAuth) check(c *conn, entity string) error {
	gen := c.claimsGen.Load() // before the check: a change during it invalidates it
	if a.ok && a.gen == gen && (a.until.IsZero() || c.h.clk.Now().Before(a.until)) {
		return nil
	}
	until, err := c.authorizeUntil(entity, sas.Send)
	a.ok, a.gen, a.until = err == nil, gen, until
	return err
}

// cbsLink is the client's sender to $cbs: put-token requests, answered at
// once (validation needs no I/O) on the client's reply link.
type cbsLink struct {
	c    *conn
	node string // the link's target address, the reply-to of requests without one
}

func (c *conn) attachCBS(r *amqp.Receiver) (amqp.ReceiverHandler, error) {
	if err := c.takeCBS(0); err != nil {
		return nil, err
	}
	c.h.metrics.LinkAttached("$cbs", false)
	return cbsLink{c: c, node: r.Remote().Target.Address}, nil
}

// takeCBS counts a $cbs link of one direction (0: the client's sender, 1:
// its receiver), refusing a second one while the first is attached: Service
// Bus allows one sender and one receiver on $cbs per connection
// (Azure/azure-sdk-for-go#20334).
func (c *conn) takeCBS(dir int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cbsLinks[dir] > 0 {
		what := [2]string{"sender", "receiver"}[dir]
		return amqp.NewError(amqp.CondResourceLimitExceeded,
			"A connection can have only one %s link on the $cbs node; detach the other one first.", what)
	}
	c.cbsLinks[dir]++
	return nil
}

// releaseCBS uncounts a $cbs link of one direction.
func (c *conn) releaseCBS(dir int) {
	c.mu.Lock()
	c.cbsLinks[dir]--
	c.mu.Unlock()
}

// Transfer handles one put-token request.
func (l cbsLink) Transfer(r *amqp.Receiver, d amqp.Delivery) {
	req, err := parseRequest(d.Payload, l.node)
	if err != nil {
		l.c.h.log.Debug("bad $cbs request", "err", err)
		settle(d, &frames.Rejected{Error: amqpError(err)})
		return
	}
	status, desc := l.c.putToken(req)
	l.c.h.log.Debug("put-token", "audience", req.appProps["name"], "status", status, "description", desc)
	resp := response{status: status, desc: desc, cbs: true}
	l.c.reply(req, &resp)
	settle(d, &frames.Accepted{})
}

// Detach counts the link's end.
func (l cbsLink) Detach(*amqp.Receiver, error) {
	l.c.releaseCBS(0)
	l.c.h.metrics.LinkDetached("$cbs", false)
}

// settle settles an unsettled delivery, ignoring a link that has gone.
func settle(d amqp.Delivery, st frames.DeliveryState) {
	if !d.Settled {
		_ = d.Settle(st)
	}
}

// putToken validates a put-token request and records the claim. It returns
// the status code and description of the reply: 202 accepted, 400 for a
// malformed request, 401 for a token that does not authorize the audience,
// 404 for an audience naming an entity that does not exist.
func (c *conn) putToken(req *request) (int32, string) {
	if op, _ := req.appProps["operation"].(string); op != "put-token" {
		return 400, "The $cbs node supports only the put-token operation, not '" + op + "'."
	}
	audience, _ := req.appProps["name"].(string)
	if audience == "" {
		return 400, "put-token requires the application property 'name' (the token's audience)."
	}
	entity, resource := "", sas.ResourcePath(audience)
	if p := resource; p != "" {
		addr, err := ParseAddress(p)
		if err != nil || addr.Node == NodeCBS {
			return 404, "The audience '" + audience + "' does not name an entity of this namespace."
		}
		entity = sas.NormalizePath(addr.Entity)
	}
	cl := claim{rights: sas.Send | sas.Listen | sas.Manage}
	if c.h.auth != nil {
		token, ok := req.value.(string)
		if !ok {
			return 400, "put-token requires the token as an amqp-value string body."
		}
		var err error
		host := ""
		if o := c.ac.RemoteOpen(); o != nil {
			host = o.Hostname
		}
		if cl, err = c.h.validate(token, host, resource); err != nil {
			return 401, err.Error()
		}
	}
	if entity != "" {
		if err := c.h.entityExists(context.Background(), entity); err != nil {
			m := mapError(err)
			if m.status == 404 {
				// Service Bus's words: the Java SDK takes a 404 for a
				// missing entity (not retried) only when its description
				// reads "The messaging entity ... could not be found".
				return 404, "The messaging entity '" + audience + "' could not be found."
			}
			return m.status, m.desc
		}
	}
	c.setClaim(entity, cl)
	return 202, "Accepted"
}

// validate checks a SAS token for a resource path (the audience's) on a
// connection opened for host and returns the rights it grants.
func (h *Handler) validate(token, host, resource string) (claim, error) {
	t, err := sas.ParseToken(token)
	if err != nil {
		return claim{}, err
	}
	// One check of the signature for all three rights: the SDKs put a
	// token for every link they attach.
	rights, err := h.auth.GrantsOnHost(t, h.clk.Now(), host, resource)
	if errors.Is(err, sas.ErrExpired) {
		return claim{}, errors.New("ExpiredToken: The token is expired. Expiration time: " + t.Expiry.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return claim{}, err
	}
	cl := claim{rights: rights & (sas.Manage | sas.Send | sas.Listen), expires: t.Expiry}
	if cl.rights == 0 {
		return claim{}, fmt.Errorf("%w: the token's rule grants no right", sas.ErrNoRight)
	}
	return cl, nil
}
