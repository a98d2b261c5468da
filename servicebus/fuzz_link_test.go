package servicebus

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/frames"
	"github.com/busbar-io/busbar/broker"
	"github.com/busbar-io/busbar/clock"
	"github.com/busbar-io/busbar/sas"
)

// attachSeeds are session receivers' attaches as the SDKs send them:
// described with either descriptor (Go, .NET), plain (JS), named or next.
func attachSeeds(tb testing.TB) [][]byte {
	filters := []any{
		&encoding.Described{Descriptor: descSessionFilter, Value: "s1"},
		&encoding.Described{Descriptor: descSessionFilterDomain, Value: nil},
		&encoding.Described{Descriptor: encoding.Symbol("com.microsoft:session-filter"), Value: encoding.Symbol("s")},
		"plain",
		nil,
	}
	var out [][]byte
	for _, f := range filters {
		a := &frames.Attach{Name: "r", Handle: 0, Role: frames.RoleReceiver,
			Source:     &frames.Source{Address: "q/Subscriptions/s", Filter: encoding.Fields{filterSession: f}},
			Target:     &frames.Target{Address: "client"},
			Properties: encoding.Fields{propTimeout: uint32(1500)},
		}
		b, err := frames.Append(nil, frames.TypeAMQP, 0, a)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzSessionFilter decodes arbitrary attach frames and reads the session
// filter, the timeout and the address from them as a session receiver's
// attach does. Whatever filter is accepted must be answerable: the reply
// echoing its descriptor must encode.
func FuzzSessionFilter(f *testing.F) {
	for _, s := range attachSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < frames.HeaderSize {
			return
		}
		h, err := frames.ParseHeader(in[:frames.HeaderSize])
		if err != nil || int(h.Size) != len(in) || h.Type != frames.TypeAMQP {
			return
		}
		body, err := frames.Decode(h, in)
		if err != nil {
			return
		}
		a, ok := body.(*frames.Attach)
		if !ok {
			return
		}
		if a.Source != nil {
			_, _ = ParseAddress(a.Source.Address)
		}
		if d := attachTimeout(a.Properties); d < 0 {
			t.Fatalf("negative session timeout %v", d)
		}
		req, ok := sessionFilter(a.Source)
		if !ok {
			return
		}
		if req.next && req.id != "" {
			t.Fatalf("both next and session %q", req.id)
		}
		var v any = "the-session"
		if !req.plain {
			v = &encoding.Described{Descriptor: req.descriptor, Value: "the-session"}
		}
		reply := &frames.Attach{Name: "r", Role: frames.RoleSender,
			Source: &frames.Source{Filter: encoding.Fields{filterSession: v}}}
		if _, err := frames.Append(nil, frames.TypeAMQP, 0, reply); err != nil {
			t.Fatalf("the reply to an accepted session filter does not encode: %v", err)
		}
	})
}

// FuzzLockToken reads lock tokens as both places a client sends them: a
// disposition's delivery-tag (16 bytes in .NET GUID order) and a
// management request's lock-tokens array (decoded from arbitrary AMQP
// bytes). A tag is a token exactly when it has 16 bytes and maps back to
// itself; the array gives a token per element or a clear error.
func FuzzLockToken(f *testing.F) {
	tok := broker.LockToken{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	arr, err := encoding.Append(nil, encoding.Array{Code: encoding.CodeUUID, Elems: []any{encoding.UUID(tok), encoding.UUID{}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(dotnetTag(tok), arr)
	f.Add([]byte("short"), []byte{0x40})
	f.Fuzz(func(t *testing.T, tag, value []byte) {
		got, ok := tokenOfTag(tag)
		if ok != (len(tag) == 16) {
			t.Fatalf("tag of %d bytes accepted=%v", len(tag), ok)
		}
		if ok && !bytes.Equal(dotnetTag(got), tag) {
			t.Fatalf("tag % x read as %v, which writes back as % x", tag, got, dotnetTag(got))
		}
		d := encoding.NewDecoder(value)
		v, err := d.ReadValue()
		if err != nil {
			return
		}
		toks, err := fieldMap{"lock-tokens": v}.tokens("lock-tokens")
		if err != nil {
			if !strings.Contains(err.Error(), "lock-tokens") {
				t.Fatalf("error does not name the field: %v", err)
			}
			return
		}
		es, _ := elems(v)
		if len(toks) != len(es) {
			t.Fatalf("%d tokens from %d elements", len(toks), len(es))
		}
	})
}

// FuzzCBSToken validates arbitrary put-token requests (token, connection
// host name, audience) as the $cbs node does: a token is accepted only
// when correctly signed, unexpired and for a covered audience; every
// refusal is a description, never a panic.
func FuzzCBSToken(f *testing.F) {
	now := time.Unix(1_900_000_000, 0)
	auth, err := sas.NewAuthorizer([]sas.Rule{
		{KeyName: "root", PrimaryKey: "root-key", Rights: sas.Manage | sas.Send | sas.Listen},
		{KeyName: "send", PrimaryKey: "send-key", Rights: sas.Send, Entity: "q"},
	})
	if err != nil {
		f.Fatal(err)
	}
	h := &Handler{auth: auth, clk: clock.NewFake(now)}
	f.Add(sas.Sign("amqp://localhost/q", "root", "root-key", now.Add(time.Hour)), "localhost", "q")
	f.Add(sas.Sign("sb://localhost/q", "send", "send-key", now.Add(-time.Hour)), "localhost", "q")
	f.Add(sas.Sign("q", "send", "send-key", now.Add(time.Hour)), "", "other")
	f.Add("SharedAccessSignature sr=q&sig=x&se=1&skn=root", "h", "q")
	f.Fuzz(func(t *testing.T, token, host, resource string) {
		cl, err := h.validate(token, host, resource)
		if err != nil {
			if cl.rights != 0 {
				t.Fatalf("refused token grants %v", cl.rights)
			}
			if err.Error() == "" {
				t.Fatal("refusal without a description")
			}
			return
		}
		if cl.rights == 0 || !cl.expires.After(now) {
			t.Fatalf("accepted token with rights %v expiring %v", cl.rights, cl.expires)
		}
		tok, perr := sas.ParseToken(token)
		if perr != nil {
			t.Fatalf("accepted a token that does not parse: %v", perr)
		}
		if errors.Is(auth.AuthorizeTokenOnHost(tok, now, host, resource, sas.Send), sas.ErrBadSignature) {
			t.Fatal("accepted a badly signed token")
		}
	})
}
