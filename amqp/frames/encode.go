package frames

import (
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// composite writes a described list field by field and drops the trailing
// fields left at their defaults, as the specification allows.
type composite struct {
	dst     []byte
	start   int // the list header, for EndList
	n       int // fields written
	keepLen int // len(dst) after the last field to keep
	keepN   int
}

func beginComposite(dst []byte, code uint64) composite {
	dst = encoding.AppendDescriptor(dst, code)
	dst, start := encoding.BeginList(dst)
	return composite{dst: dst, start: start, keepLen: len(dst)}
}

// done records one written field; keep says it is not at its default (or
// must be written regardless).
func (c *composite) done(keep bool) {
	c.n++
	if keep {
		c.keepLen, c.keepN = len(c.dst), c.n
	}
}

func (c *composite) null() {
	c.dst = encoding.AppendNull(c.dst)
	c.done(false)
}

func (c *composite) uint(v uint32, keep bool) {
	c.dst = encoding.AppendUint(c.dst, v)
	c.done(keep)
}

func (c *composite) optUint(p *uint32) {
	if p == nil {
		c.null()
		return
	}
	c.uint(*p, true)
}

func (c *composite) bool(v bool) {
	c.dst = encoding.AppendBool(c.dst, v)
	c.done(v)
}

func (c *composite) string(v string, keep bool) {
	c.dst = encoding.AppendString(c.dst, v)
	c.done(keep)
}

func (c *composite) optString(v string) {
	if v == "" {
		c.null()
		return
	}
	c.string(v, true)
}

func (c *composite) optSymbol(v encoding.Symbol) {
	if v == "" {
		c.null()
		return
	}
	c.dst = encoding.AppendSymbol(c.dst, v)
	c.done(true)
}

func (c *composite) symbols(v []encoding.Symbol) {
	if len(v) == 0 {
		c.null()
		return
	}
	c.dst = encoding.AppendSymbolArray(c.dst, v)
	c.done(true)
}

// fields writes a fields map; nil is null unless always is set, in which
// case it is written as an empty map.
func (c *composite) fields(v encoding.Fields, always bool) error {
	if v == nil && !always {
		c.null()
		return nil
	}
	var err error
	if c.dst, err = encoding.AppendFields(c.dst, v); err != nil {
		return err
	}
	c.done(true)
	return nil
}

func (c *composite) binary(v []byte) {
	if v == nil {
		c.null()
		return
	}
	c.dst = encoding.AppendBinary(c.dst, v)
	c.done(true)
}

func (c *composite) state(s DeliveryState) error {
	if s == nil {
		c.null()
		return nil
	}
	var err error
	if c.dst, err = appendDeliveryState(c.dst, s); err != nil {
		return err
	}
	c.done(true)
	return nil
}

func (c *composite) error(e *Error) error {
	if e == nil {
		c.null()
		return nil
	}
	var err error
	if c.dst, err = appendError(c.dst, e); err != nil {
		return err
	}
	c.done(true)
	return nil
}

// end completes the list with the fields kept.
func (c *composite) end() []byte {
	return encoding.EndList(c.dst[:c.keepLen], c.start, c.keepN)
}

func appendTransfer(dst []byte, t *Transfer) ([]byte, error) {
	if len(t.DeliveryTag) > 32 {
		return dst, fmt.Errorf("transfer: delivery-tag of %d bytes exceeds 32", len(t.DeliveryTag))
	}
	c := beginComposite(dst, DescTransfer)
	c.uint(t.Handle, true)
	c.optUint(t.DeliveryID)
	c.binary(t.DeliveryTag)
	c.optUint(t.MessageFormat)
	c.bool(t.Settled)
	c.bool(t.More)
	if t.RcvSettleMode != nil {
		c.dst = encoding.AppendUbyte(c.dst, uint8(*t.RcvSettleMode))
		c.done(true)
	} else {
		c.null()
	}
	if err := c.state(t.State); err != nil {
		return dst, err
	}
	c.bool(t.Resume)
	c.bool(t.Aborted)
	c.bool(t.Batchable)
	return c.end(), nil
}

func appendFlow(dst []byte, f *Flow) ([]byte, error) {
	c := beginComposite(dst, DescFlow)
	c.optUint(f.NextIncomingID)
	c.uint(f.IncomingWindow, true)
	c.uint(f.NextOutgoingID, true)
	c.uint(f.OutgoingWindow, true)
	c.optUint(f.Handle)
	c.optUint(f.DeliveryCount)
	c.optUint(f.LinkCredit)
	c.optUint(f.Available)
	c.bool(f.Drain)
	c.bool(f.Echo)
	if err := c.fields(f.Properties, false); err != nil {
		return dst, err
	}
	return c.end(), nil
}

func appendDisposition(dst []byte, d *Disposition) ([]byte, error) {
	c := beginComposite(dst, DescDisposition)
	c.dst = encoding.AppendBool(c.dst, bool(d.Role))
	c.done(true)
	c.uint(d.First, true)
	c.optUint(d.Last)
	c.bool(d.Settled)
	if err := c.state(d.State); err != nil {
		return dst, err
	}
	c.bool(d.Batchable)
	return c.end(), nil
}

// appendOpen writes every field through properties (an empty map when nil),
// for peers that read open by position.
func appendOpen(dst []byte, o *Open) ([]byte, error) {
	c := beginComposite(dst, DescOpen)
	c.string(o.ContainerID, true)
	c.optString(o.Hostname)
	if o.MaxFrameSize == 0 || o.MaxFrameSize == 4294967295 {
		c.null()
	} else {
		c.uint(o.MaxFrameSize, true)
	}
	c.dst = encoding.AppendUshort(c.dst, o.ChannelMax)
	c.done(true)
	c.uint(o.IdleTimeout, o.IdleTimeout != 0)
	c.symbols(o.OutgoingLocales)
	c.symbols(o.IncomingLocales)
	c.symbols(o.OfferedCapabilities)
	c.symbols(o.DesiredCapabilities)
	if err := c.fields(o.Properties, true); err != nil {
		return dst, err
	}
	return c.end(), nil
}

// appendBegin writes every field through properties (see appendOpen).
func appendBegin(dst []byte, b *Begin) ([]byte, error) {
	c := beginComposite(dst, DescBegin)
	if b.RemoteChannel != nil {
		c.dst = encoding.AppendUshort(c.dst, *b.RemoteChannel)
		c.done(true)
	} else {
		c.null()
	}
	c.uint(b.NextOutgoingID, true)
	c.uint(b.IncomingWindow, true)
	c.uint(b.OutgoingWindow, true)
	c.uint(b.HandleMax, true)
	c.symbols(b.OfferedCapabilities)
	c.symbols(b.DesiredCapabilities)
	if err := c.fields(b.Properties, true); err != nil {
		return dst, err
	}
	return c.end(), nil
}

// appendAttach writes every field through properties (see appendOpen).
func appendAttach(dst []byte, a *Attach) ([]byte, error) {
	c := beginComposite(dst, DescAttach)
	c.string(a.Name, true)
	c.uint(a.Handle, true)
	c.dst = encoding.AppendBool(c.dst, bool(a.Role))
	c.done(true)
	c.dst = encoding.AppendUbyte(c.dst, uint8(a.SndSettleMode))
	c.done(true)
	c.dst = encoding.AppendUbyte(c.dst, uint8(a.RcvSettleMode))
	c.done(true)
	var err error
	if a.Source == nil {
		c.null()
	} else {
		c.dst, err = appendSource(c.dst, a.Source)
		if err != nil {
			return dst, err
		}
		c.done(true)
	}
	if a.Target == nil {
		c.null()
	} else {
		c.dst, err = appendTarget(c.dst, a.Target)
		if err != nil {
			return dst, err
		}
		c.done(true)
	}
	if a.Unsettled == nil {
		c.null()
	} else {
		if c.dst, err = encoding.Append(c.dst, a.Unsettled); err != nil {
			return dst, err
		}
		c.done(true)
	}
	c.bool(a.IncompleteUnsettled)
	if a.Role == RoleSender {
		c.uint(a.InitialDeliveryCount, true)
	} else {
		c.null()
	}
	if a.MaxMessageSize == 0 {
		c.null()
	} else {
		c.dst = encoding.AppendUlong(c.dst, a.MaxMessageSize)
		c.done(true)
	}
	c.symbols(a.OfferedCapabilities)
	c.symbols(a.DesiredCapabilities)
	if err := c.fields(a.Properties, true); err != nil {
		return dst, err
	}
	return c.end(), nil
}

func appendSource(dst []byte, s *Source) ([]byte, error) {
	c := beginComposite(dst, DescSource)
	if err := terminusFields(&c, s.Address, s.Durable, s.ExpiryPolicy, s.Timeout, s.Dynamic, s.DynamicNodeProperties); err != nil {
		return dst, err
	}
	c.optSymbol(s.DistributionMode)
	if err := c.fields(s.Filter, false); err != nil {
		return dst, err
	}
	if err := c.state(s.DefaultOutcome); err != nil {
		return dst, err
	}
	c.symbols(s.Outcomes)
	c.symbols(s.Capabilities)
	return c.end(), nil
}

func appendTarget(dst []byte, t *Target) ([]byte, error) {
	c := beginComposite(dst, DescTarget)
	if err := terminusFields(&c, t.Address, t.Durable, t.ExpiryPolicy, t.Timeout, t.Dynamic, t.DynamicNodeProperties); err != nil {
		return dst, err
	}
	c.symbols(t.Capabilities)
	return c.end(), nil
}

func terminusFields(c *composite, addr string, durable uint32, expiry encoding.Symbol, timeout uint32,
	dynamic bool, props encoding.Fields) error {
	c.optString(addr)
	c.uint(durable, durable != 0)
	if expiry == "" || expiry == "session-end" {
		c.null()
	} else {
		c.optSymbol(expiry)
	}
	c.uint(timeout, timeout != 0)
	c.bool(dynamic)
	return c.fields(props, false)
}

func appendDetach(dst []byte, d *Detach) ([]byte, error) {
	c := beginComposite(dst, DescDetach)
	c.uint(d.Handle, true)
	c.bool(d.Closed)
	if err := c.error(d.Error); err != nil {
		return dst, err
	}
	return c.end(), nil
}

func appendErrorOnly(dst []byte, code uint64, e *Error) ([]byte, error) {
	c := beginComposite(dst, code)
	if err := c.error(e); err != nil {
		return dst, err
	}
	return c.end(), nil
}

// appendError writes all three fields of an error, null ones included: the
// Python SDK's AMQP stack (pyamqp) reads a rejected outcome's error by
// position and fails on a shorter list, as Service Bus never sends one.
func appendError(dst []byte, e *Error) ([]byte, error) {
	c := beginComposite(dst, DescError)
	c.dst = encoding.AppendSymbol(c.dst, e.Condition)
	c.done(true)
	c.optString(e.Description)
	if err := c.fields(e.Info, false); err != nil {
		return dst, err
	}
	c.keepLen, c.keepN = len(c.dst), c.n
	return c.end(), nil
}

func appendDeliveryState(dst []byte, s DeliveryState) ([]byte, error) {
	switch s := s.(type) {
	case *Accepted:
		return append(encoding.AppendDescriptor(dst, DescAccepted), encoding.CodeList0), nil
	case *Released:
		return append(encoding.AppendDescriptor(dst, DescReleased), encoding.CodeList0), nil
	case *Received:
		c := beginComposite(dst, DescReceived)
		c.uint(s.SectionNumber, true)
		c.dst = encoding.AppendUlong(c.dst, s.SectionOffset)
		c.done(true)
		return c.end(), nil
	case *Rejected:
		c := beginComposite(dst, DescRejected)
		if err := c.error(s.Error); err != nil {
			return dst, err
		}
		return c.end(), nil
	case *Modified:
		c := beginComposite(dst, DescModified)
		c.bool(s.DeliveryFailed)
		c.bool(s.UndeliverableHere)
		if s.MessageAnnotations == nil {
			c.null()
		} else {
			var err error
			if c.dst, err = encoding.AppendAnnotations(c.dst, s.MessageAnnotations); err != nil {
				return dst, err
			}
			c.done(true)
		}
		return c.end(), nil
	}
	return dst, fmt.Errorf("frames: unknown delivery state %T", s)
}

func appendSASL(dst []byte, body Body) ([]byte, error) {
	switch b := body.(type) {
	case *SASLMechanisms:
		c := beginComposite(dst, DescSASLMechanisms)
		c.dst = encoding.AppendSymbolArray(c.dst, b.Mechanisms)
		c.done(true)
		return c.end(), nil
	case *SASLInit:
		c := beginComposite(dst, DescSASLInit)
		c.dst = encoding.AppendSymbol(c.dst, b.Mechanism)
		c.done(true)
		c.binary(b.InitialResponse)
		c.optString(b.Hostname)
		return c.end(), nil
	case *SASLChallenge:
		c := beginComposite(dst, DescSASLChallenge)
		c.dst = encoding.AppendBinary(c.dst, b.Challenge)
		c.done(true)
		return c.end(), nil
	case *SASLResponse:
		c := beginComposite(dst, DescSASLResponse)
		c.dst = encoding.AppendBinary(c.dst, b.Response)
		c.done(true)
		return c.end(), nil
	case *SASLOutcome:
		c := beginComposite(dst, DescSASLOutcome)
		c.dst = encoding.AppendUbyte(c.dst, uint8(b.Code))
		c.done(true)
		c.binary(b.AdditionalData)
		return c.end(), nil
	}
	return dst, fmt.Errorf("frames: cannot encode %T", body)
}
