package amqp

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
)

// SASL mechanisms this package understands.
const (
	// MechAnonymous is SASL ANONYMOUS (RFC 4505): no credentials, an
	// optional trace string.
	MechAnonymous = "ANONYMOUS"
	// MechPlain is SASL PLAIN (RFC 4616): authzid, user name and password.
	MechPlain = "PLAIN"
	// MechMSSBCBS is Microsoft's mechanism meaning "anonymous here, the
	// identity follows through claims-based security on the $cbs node".
	MechMSSBCBS = "MSSBCBS"
)

// Protocol headers (transport §2.2, security §5.3.1).
var (
	headerAMQP = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	headerSASL = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// Credentials is what a client presented during SASL, handed to
// Config.Authenticate.
type Credentials struct {
	// Mechanism is the mechanism the client chose; empty when it skipped
	// SASL (Config.AllowNoSASL).
	Mechanism string
	// Hostname is the host name the client gave in sasl-init.
	Hostname string
	// AuthzID, Username and Password are PLAIN's three fields.
	AuthzID, Username, Password string
	// Trace is ANONYMOUS's (or MSSBCBS's) optional initial response.
	Trace string
	// TLS is the connection's TLS state, nil for plain TCP.
	TLS *tls.ConnectionState
	// RemoteAddr is the client's address.
	RemoteAddr net.Addr
}

// saslError is a failed SASL exchange: the reason is logged, the peer gets
// a sasl-outcome (when code is set) and the connection is closed.
type saslError struct {
	code   frames.SASLCode
	reason string
}

// Error implements error.
func (e *saslError) Error() string { return "sasl: " + e.reason }

// credentials builds the Credentials of an SASL init, or explains why it is
// malformed for its mechanism.
func (c *Conn) credentials(init *frames.SASLInit) (*Credentials, error) {
	cr := c.baseCredentials()
	cr.Mechanism = string(init.Mechanism)
	cr.Hostname = init.Hostname
	offered := false
	for _, m := range c.cfg.Mechanisms {
		if m == cr.Mechanism {
			offered = true
		}
	}
	if !offered {
		return nil, fmt.Errorf("mechanism %q was not offered", init.Mechanism)
	}
	switch cr.Mechanism {
	case MechAnonymous, MechMSSBCBS:
		cr.Trace = string(init.InitialResponse)
	case MechPlain:
		parts := bytes.Split(init.InitialResponse, []byte{0})
		if len(parts) != 3 {
			return nil, fmt.Errorf("PLAIN response has %d NUL-separated fields, want 3", len(parts))
		}
		cr.AuthzID, cr.Username, cr.Password = string(parts[0]), string(parts[1]), string(parts[2])
	default:
		return nil, fmt.Errorf("mechanism %q is not supported", init.Mechanism)
	}
	return cr, nil
}

func (c *Conn) baseCredentials() *Credentials {
	cr := &Credentials{RemoteAddr: c.nc.RemoteAddr()}
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		cr.TLS = &st
	}
	return cr
}

// authenticate runs Config.Authenticate, or accepts by default.
func (c *Conn) authenticate(cr *Credentials) (any, error) {
	if c.cfg.Authenticate != nil {
		return c.cfg.Authenticate(cr)
	}
	if cr.Username != "" {
		return cr.Username, nil
	}
	return cr.Mechanism, nil
}

// sasl runs the SASL layer after the client's SASL header: mechanisms,
// init, outcome (none of the supported mechanisms needs a challenge). It
// returns the identity, or a *saslError.
func (c *Conn) sasl() (any, error) {
	mechs := make([]encoding.Symbol, len(c.cfg.Mechanisms))
	for i, m := range c.cfg.Mechanisms {
		mechs[i] = encoding.Symbol(m)
	}
	out := append([]byte(nil), headerSASL[:]...)
	out, err := frames.Append(out, frames.TypeSASL, 0, &frames.SASLMechanisms{Mechanisms: mechs})
	if err != nil {
		return nil, err
	}
	if err := c.writeSync(out); err != nil {
		return nil, err
	}
	h, f, err := c.rd.next(frames.MinMaxFrameSize)
	if err != nil {
		return nil, err
	}
	if h.Type != frames.TypeSASL {
		return nil, &saslError{reason: fmt.Sprintf("frame type %d during SASL, want sasl-init", h.Type)}
	}
	body, err := frames.Decode(h, f)
	if err != nil {
		return nil, &saslError{code: frames.SASLSysPerm, reason: "malformed sasl frame: " + err.Error()}
	}
	init, ok := body.(*frames.SASLInit)
	if !ok {
		return nil, &saslError{code: frames.SASLSysPerm, reason: fmt.Sprintf("got %T, want sasl-init", body)}
	}
	cr, err := c.credentials(init)
	if err != nil {
		return nil, &saslError{code: frames.SASLAuth, reason: err.Error()}
	}
	id, err := c.authenticate(cr)
	if err != nil {
		return nil, &saslError{code: frames.SASLAuth, reason: "authentication refused: " + err.Error()}
	}
	out, err = frames.Append(out[:0], frames.TypeSASL, 0, &frames.SASLOutcome{Code: frames.SASLOK})
	if err != nil {
		return nil, err
	}
	if err := c.writeSync(out); err != nil {
		return nil, err
	}
	c.log.Debug("sasl accepted", "mechanism", cr.Mechanism, "user", cr.Username)
	return id, nil
}

// saslFail sends the outcome for a failed exchange, if any is due.
func (c *Conn) saslFail(e *saslError) {
	if e.code == frames.SASLOK {
		return
	}
	out, err := frames.Append(nil, frames.TypeSASL, 0, &frames.SASLOutcome{Code: e.code})
	if err == nil {
		_ = c.writeSync(out)
	}
}
