package frames

import (
	"github.com/busbar-io/busbar/amqp/encoding"
)

// fieldReader walks the fields of a composite (a described list) in order.
type fieldReader struct {
	d     encoding.Decoder
	n, i  int
	frame string
}

// openComposite reads a list header; the descriptor was already read.
func openComposite(dec *encoding.Decoder, frame string) (fieldReader, error) {
	c, n, err := dec.ReadList()
	if err != nil {
		return fieldReader{}, decodeErr(frame, "", err)
	}
	return fieldReader{d: c, n: n, frame: frame}, nil
}

// next reports whether the next field is present (within the list and not
// null) and moves to it; a null is consumed.
func (f *fieldReader) next() bool {
	i := f.i
	f.i++
	if i >= f.n {
		return false
	}
	return !f.d.ReadNull()
}

func (f *fieldReader) err(field string, err error) error { return decodeErr(f.frame, field, err) }

func (f *fieldReader) uint32(field string, dst *uint32) error {
	v, err := f.d.ReadUint32()
	if err != nil {
		return f.err(field, err)
	}
	*dst = v
	return nil
}

func (f *fieldReader) bool(field string, dst *bool) error {
	v, err := f.d.ReadBool()
	if err != nil {
		return f.err(field, err)
	}
	*dst = v
	return nil
}

func (f *fieldReader) string(field string, dst *string) error {
	v, err := f.d.ReadString()
	if err != nil {
		return f.err(field, err)
	}
	*dst = v
	return nil
}

func (f *fieldReader) symbol(field string, dst *encoding.Symbol) error {
	v, err := f.d.ReadSymbol()
	if err != nil {
		return f.err(field, err)
	}
	*dst = v
	return nil
}

func (f *fieldReader) symbols(field string, dst *[]encoding.Symbol) error {
	v, err := f.d.ReadSymbolArray()
	if err != nil {
		return f.err(field, err)
	}
	*dst = v
	return nil
}

func (f *fieldReader) fields(field string, dst *encoding.Fields) error {
	v, err := f.d.ReadFields()
	if err != nil {
		return f.err(field, err)
	}
	*dst = v
	return nil
}

// binaryCopy reads binary into a fresh slice.
func (f *fieldReader) binaryCopy(field string, dst *[]byte) error {
	v, err := f.d.ReadBinary()
	if err != nil {
		return f.err(field, err)
	}
	*dst = append([]byte{}, v...)
	return nil
}

func decodeOpen(dec *encoding.Decoder) (*Open, error) {
	f, err := openComposite(dec, "open")
	if err != nil {
		return nil, err
	}
	o := &Open{MaxFrameSize: 4294967295, ChannelMax: 65535}
	if !f.next() {
		return nil, missing("open", "container-id")
	}
	if err := f.string("container-id", &o.ContainerID); err != nil {
		return nil, err
	}
	if f.next() {
		if err := f.string("hostname", &o.Hostname); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.uint32("max-frame-size", &o.MaxFrameSize); err != nil {
			return nil, err
		}
		if o.MaxFrameSize < MinMaxFrameSize {
			return nil, invalidField("open", "max-frame-size", "%d is below the minimum %d", o.MaxFrameSize, MinMaxFrameSize)
		}
	}
	if f.next() {
		v, err := f.d.ReadUint16()
		if err != nil {
			return nil, f.err("channel-max", err)
		}
		o.ChannelMax = v
	}
	if f.next() {
		if err := f.uint32("idle-time-out", &o.IdleTimeout); err != nil {
			return nil, err
		}
	}
	for _, s := range []struct {
		name string
		dst  *[]encoding.Symbol
	}{
		{"outgoing-locales", &o.OutgoingLocales},
		{"incoming-locales", &o.IncomingLocales},
		{"offered-capabilities", &o.OfferedCapabilities},
		{"desired-capabilities", &o.DesiredCapabilities},
	} {
		if f.next() {
			if err := f.symbols(s.name, s.dst); err != nil {
				return nil, err
			}
		}
	}
	if f.next() {
		if err := f.fields("properties", &o.Properties); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func decodeBegin(dec *encoding.Decoder) (*Begin, error) {
	f, err := openComposite(dec, "begin")
	if err != nil {
		return nil, err
	}
	b := &Begin{HandleMax: 4294967295}
	if f.next() {
		v, err := f.d.ReadUint16()
		if err != nil {
			return nil, f.err("remote-channel", err)
		}
		b.RemoteChannel = &v
	}
	for _, m := range []struct {
		name string
		dst  *uint32
	}{
		{"next-outgoing-id", &b.NextOutgoingID},
		{"incoming-window", &b.IncomingWindow},
		{"outgoing-window", &b.OutgoingWindow},
	} {
		if !f.next() {
			return nil, missing("begin", m.name)
		}
		if err := f.uint32(m.name, m.dst); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.uint32("handle-max", &b.HandleMax); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.symbols("offered-capabilities", &b.OfferedCapabilities); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.symbols("desired-capabilities", &b.DesiredCapabilities); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.fields("properties", &b.Properties); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func decodeAttach(dec *encoding.Decoder) (*Attach, error) {
	f, err := openComposite(dec, "attach")
	if err != nil {
		return nil, err
	}
	a := &Attach{SndSettleMode: SenderSettleMixed, RcvSettleMode: ReceiverSettleFirst}
	if !f.next() {
		return nil, missing("attach", "name")
	}
	if err := f.string("name", &a.Name); err != nil {
		return nil, err
	}
	if !f.next() {
		return nil, missing("attach", "handle")
	}
	if err := f.uint32("handle", &a.Handle); err != nil {
		return nil, err
	}
	if !f.next() {
		return nil, missing("attach", "role")
	}
	var role bool
	if err := f.bool("role", &role); err != nil {
		return nil, err
	}
	a.Role = Role(role)
	if f.next() {
		v, err := f.d.ReadUint8()
		if err != nil {
			return nil, f.err("snd-settle-mode", err)
		}
		if v > uint8(SenderSettleMixed) {
			return nil, invalidField("attach", "snd-settle-mode", "unknown mode %d", v)
		}
		a.SndSettleMode = SenderSettleMode(v)
	}
	if f.next() {
		v, err := f.d.ReadUint8()
		if err != nil {
			return nil, f.err("rcv-settle-mode", err)
		}
		if v > uint8(ReceiverSettleSecond) {
			return nil, invalidField("attach", "rcv-settle-mode", "unknown mode %d", v)
		}
		a.RcvSettleMode = ReceiverSettleMode(v)
	}
	if f.next() {
		if a.Source, err = decodeSource(&f.d); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if a.Target, err = decodeTarget(&f.d); err != nil {
			return nil, err
		}
	}
	if f.next() {
		v, err := f.d.ReadValue()
		if err != nil {
			return nil, f.err("unsettled", err)
		}
		m, ok := v.(encoding.Map)
		if !ok {
			return nil, invalidField("attach", "unsettled", "is not a map")
		}
		a.Unsettled = m
	}
	if f.next() {
		if err := f.bool("incomplete-unsettled", &a.IncompleteUnsettled); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.uint32("initial-delivery-count", &a.InitialDeliveryCount); err != nil {
			return nil, err
		}
	}
	if f.next() {
		v, err := f.d.ReadUint64()
		if err != nil {
			return nil, f.err("max-message-size", err)
		}
		a.MaxMessageSize = v
	}
	if f.next() {
		if err := f.symbols("offered-capabilities", &a.OfferedCapabilities); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.symbols("desired-capabilities", &a.DesiredCapabilities); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.fields("properties", &a.Properties); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// decodeTransfer decodes into t using d's storage for the optional fields.
func (d *Decoder) decodeTransfer(dec *encoding.Decoder, t *Transfer) error {
	f, err := openComposite(dec, "transfer")
	if err != nil {
		return err
	}
	*t = Transfer{}
	if !f.next() {
		return missing("transfer", "handle")
	}
	if err := f.uint32("handle", &t.Handle); err != nil {
		return err
	}
	if f.next() {
		if err := f.uint32("delivery-id", &d.u32[0]); err != nil {
			return err
		}
		t.DeliveryID = &d.u32[0]
	}
	if f.next() {
		v, err := f.d.ReadBinary()
		if err != nil {
			return f.err("delivery-tag", err)
		}
		if len(v) > 32 {
			return invalidField("transfer", "delivery-tag", "%d bytes exceed the 32-byte limit", len(v))
		}
		t.DeliveryTag = v
	}
	if f.next() {
		if err := f.uint32("message-format", &d.u32[1]); err != nil {
			return err
		}
		t.MessageFormat = &d.u32[1]
	}
	if f.next() {
		if err := f.bool("settled", &t.Settled); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool("more", &t.More); err != nil {
			return err
		}
	}
	if f.next() {
		v, err := f.d.ReadUint8()
		if err != nil {
			return f.err("rcv-settle-mode", err)
		}
		if v > uint8(ReceiverSettleSecond) {
			return invalidField("transfer", "rcv-settle-mode", "unknown mode %d", v)
		}
		d.rsm = ReceiverSettleMode(v)
		t.RcvSettleMode = &d.rsm
	}
	if f.next() {
		if t.State, err = decodeDeliveryState(&f.d, "transfer", "state"); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool("resume", &t.Resume); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool("aborted", &t.Aborted); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool("batchable", &t.Batchable); err != nil {
			return err
		}
	}
	return nil
}

// decodeFlow decodes into fl using d's storage for the optional fields.
func (d *Decoder) decodeFlow(dec *encoding.Decoder, fl *Flow) error {
	f, err := openComposite(dec, "flow")
	if err != nil {
		return err
	}
	*fl = Flow{}
	opt := func(name string, slot int, dst **uint32) error {
		if !f.next() {
			return nil
		}
		if err := f.uint32(name, &d.u32[slot]); err != nil {
			return err
		}
		*dst = &d.u32[slot]
		return nil
	}
	if err := opt("next-incoming-id", 2, &fl.NextIncomingID); err != nil {
		return err
	}
	for _, m := range [...]struct {
		name string
		dst  *uint32
	}{
		{"incoming-window", &fl.IncomingWindow},
		{"next-outgoing-id", &fl.NextOutgoingID},
		{"outgoing-window", &fl.OutgoingWindow},
	} {
		if !f.next() {
			return missing("flow", m.name)
		}
		if err := f.uint32(m.name, m.dst); err != nil {
			return err
		}
	}
	if err := opt("handle", 3, &fl.Handle); err != nil {
		return err
	}
	if err := opt("delivery-count", 4, &fl.DeliveryCount); err != nil {
		return err
	}
	if err := opt("link-credit", 5, &fl.LinkCredit); err != nil {
		return err
	}
	if err := opt("available", 6, &fl.Available); err != nil {
		return err
	}
	if f.next() {
		if err := f.bool("drain", &fl.Drain); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool("echo", &fl.Echo); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.fields("properties", &fl.Properties); err != nil {
			return err
		}
	}
	if fl.Handle == nil && (fl.DeliveryCount != nil || fl.LinkCredit != nil || fl.Available != nil) {
		return invalidField("flow", "handle", "absent while link state fields are set")
	}
	return nil
}

// decodeDisposition decodes into disp; last is storage for disp.Last.
func decodeDisposition(dec *encoding.Decoder, disp *Disposition, last *uint32) error {
	f, err := openComposite(dec, "disposition")
	if err != nil {
		return err
	}
	*disp = Disposition{}
	if !f.next() {
		return missing("disposition", "role")
	}
	var role bool
	if err := f.bool("role", &role); err != nil {
		return err
	}
	disp.Role = Role(role)
	if !f.next() {
		return missing("disposition", "first")
	}
	if err := f.uint32("first", &disp.First); err != nil {
		return err
	}
	if f.next() {
		if err := f.uint32("last", last); err != nil {
			return err
		}
		disp.Last = last
	}
	if f.next() {
		if err := f.bool("settled", &disp.Settled); err != nil {
			return err
		}
	}
	if f.next() {
		if disp.State, err = decodeDeliveryState(&f.d, "disposition", "state"); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool("batchable", &disp.Batchable); err != nil {
			return err
		}
	}
	return nil
}

func decodeDetach(dec *encoding.Decoder) (*Detach, error) {
	f, err := openComposite(dec, "detach")
	if err != nil {
		return nil, err
	}
	dt := &Detach{}
	if !f.next() {
		return nil, missing("detach", "handle")
	}
	if err := f.uint32("handle", &dt.Handle); err != nil {
		return nil, err
	}
	if f.next() {
		if err := f.bool("closed", &dt.Closed); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if dt.Error, err = decodeError(&f.d, "detach"); err != nil {
			return nil, err
		}
	}
	return dt, nil
}

// decodeErrorField decodes the single error field of end and close.
func decodeErrorField(dec *encoding.Decoder, frame string) (*Error, error) {
	f, err := openComposite(dec, frame)
	if err != nil {
		return nil, err
	}
	if !f.next() {
		return nil, nil
	}
	return decodeError(&f.d, frame)
}
