package frames

import (
	"fmt"

	"github.com/busbar-io/busbar/amqp/encoding"
)

// Shared zero-size outcomes: decoding accepted or released allocates nothing.
var (
	accepted = &Accepted{}
	released = &Released{}
)

// readDescriptor reads a descriptor, mapping a symbolic one to its code.
func readDescriptor(dec *encoding.Decoder, frame, field string) (uint64, error) {
	code, sym, err := dec.ReadDescriptor()
	if err != nil {
		return 0, decodeErr(frame, field, err)
	}
	if sym != nil {
		if code = descriptorCode(sym); code == 0 {
			return 0, invalidField(frame, field, "unknown descriptor %q", sym)
		}
	}
	return code, nil
}

// openTyped reads a described composite whose descriptor must be want.
func openTyped(dec *encoding.Decoder, want uint64, frame, field, typ string) (fieldReader, error) {
	code, err := readDescriptor(dec, frame, field)
	if err != nil {
		return fieldReader{}, err
	}
	if code != want {
		return fieldReader{}, invalidField(frame, field, "descriptor 0x%02x is not %s", code, typ)
	}
	f, err := openComposite(dec, frame)
	f.frame = frame
	return f, err
}

// decodeError decodes an error (0x1d) value.
func decodeError(dec *encoding.Decoder, frame string) (*Error, error) {
	f, err := openTyped(dec, DescError, frame, "error", "an error")
	if err != nil {
		return nil, err
	}
	e := &Error{}
	if !f.next() {
		return nil, missing(frame, "error.condition")
	}
	if err := f.symbol("error.condition", &e.Condition); err != nil {
		return nil, err
	}
	if f.next() {
		if err := f.string("error.description", &e.Description); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.fields("error.info", &e.Info); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// decodeDeliveryState decodes a delivery state or outcome.
func decodeDeliveryState(dec *encoding.Decoder, frame, field string) (DeliveryState, error) {
	code, err := readDescriptor(dec, frame, field)
	if err != nil {
		return nil, err
	}
	f, err := openComposite(dec, frame)
	if err != nil {
		return nil, err
	}
	switch code {
	case DescAccepted:
		return accepted, nil
	case DescReleased:
		return released, nil
	case DescReceived:
		r := &Received{}
		if !f.next() {
			return nil, missing(frame, field+".section-number")
		}
		if err := f.uint32(field+".section-number", &r.SectionNumber); err != nil {
			return nil, err
		}
		if !f.next() {
			return nil, missing(frame, field+".section-offset")
		}
		v, err := f.d.ReadUint64()
		if err != nil {
			return nil, f.err(field+".section-offset", err)
		}
		r.SectionOffset = v
		return r, nil
	case DescRejected:
		r := &Rejected{}
		if f.next() {
			if r.Error, err = decodeError(&f.d, frame); err != nil {
				return nil, err
			}
		}
		return r, nil
	case DescModified:
		m := &Modified{}
		if f.next() {
			if err := f.bool(field+".delivery-failed", &m.DeliveryFailed); err != nil {
				return nil, err
			}
		}
		if f.next() {
			if err := f.bool(field+".undeliverable-here", &m.UndeliverableHere); err != nil {
				return nil, err
			}
		}
		if f.next() {
			a, err := f.d.ReadStringKeyedAnnotations() // string keys: Java
			if err != nil {
				return nil, f.err(field+".message-annotations", err)
			}
			m.MessageAnnotations = a
		}
		return m, nil
	}
	return nil, invalidField(frame, field, "unsupported delivery state 0x%02x", code)
}

// terminusNames names the fields source and target share, for errors
// (spelled out rather than concatenated: an attach decodes them all).
type terminusNames struct{ address, durable, expiry, timeout, dynamic, props string }

var (
	sourceFields = terminusNames{"source.address", "source.durable", "source.expiry-policy",
		"source.timeout", "source.dynamic", "source.dynamic-node-properties"}
	targetFields = terminusNames{"target.address", "target.durable", "target.expiry-policy",
		"target.timeout", "target.dynamic", "target.dynamic-node-properties"}
)

// terminusCommon reads the fields source and target share (0-5).
func terminusCommon(f *fieldReader, n *terminusNames, addr *string, durable *uint32, expiry *encoding.Symbol,
	timeout *uint32, dynamic *bool, props *encoding.Fields) error {
	*expiry = "session-end"
	if f.next() {
		if err := f.string(n.address, addr); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.uint32(n.durable, durable); err != nil {
			return err
		}
		if *durable > 2 {
			return invalidField(f.frame, n.durable, "unknown terminus durability %d", *durable)
		}
	}
	if f.next() {
		if err := f.symbol(n.expiry, expiry); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.uint32(n.timeout, timeout); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.bool(n.dynamic, dynamic); err != nil {
			return err
		}
	}
	if f.next() {
		if err := f.fields(n.props, props); err != nil {
			return err
		}
	}
	return nil
}

func decodeSource(dec *encoding.Decoder) (*Source, error) {
	f, err := openTyped(dec, DescSource, "attach", "source", "a source")
	if err != nil {
		return nil, err
	}
	s := &Source{}
	if err := terminusCommon(&f, &sourceFields, &s.Address, &s.Durable, &s.ExpiryPolicy, &s.Timeout,
		&s.Dynamic, &s.DynamicNodeProperties); err != nil {
		return nil, err
	}
	if f.next() {
		if err := f.symbol("source.distribution-mode", &s.DistributionMode); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.fields("source.filter", &s.Filter); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if s.DefaultOutcome, err = decodeDeliveryState(&f.d, "attach", "source.default-outcome"); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.symbols("source.outcomes", &s.Outcomes); err != nil {
			return nil, err
		}
	}
	if f.next() {
		if err := f.symbols("source.capabilities", &s.Capabilities); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func decodeTarget(dec *encoding.Decoder) (*Target, error) {
	f, err := openTyped(dec, DescTarget, "attach", "target", "a target")
	if err != nil {
		return nil, err
	}
	t := &Target{}
	if err := terminusCommon(&f, &targetFields, &t.Address, &t.Durable, &t.ExpiryPolicy, &t.Timeout,
		&t.Dynamic, &t.DynamicNodeProperties); err != nil {
		return nil, err
	}
	if f.next() {
		if err := f.symbols("target.capabilities", &t.Capabilities); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// decodeSASL decodes the SASL frame bodies; byte fields are copied.
func decodeSASL(dec *encoding.Decoder, code uint64) (Body, error) {
	name := frameName(code)
	f, err := openComposite(dec, name)
	if err != nil {
		return nil, err
	}
	switch code {
	case DescSASLMechanisms:
		m := &SASLMechanisms{}
		if !f.next() {
			return nil, missing(name, "sasl-server-mechanisms")
		}
		if err := f.symbols("sasl-server-mechanisms", &m.Mechanisms); err != nil {
			return nil, err
		}
		return m, nil
	case DescSASLInit:
		in := &SASLInit{}
		if !f.next() {
			return nil, missing(name, "mechanism")
		}
		if err := f.symbol("mechanism", &in.Mechanism); err != nil {
			return nil, err
		}
		if f.next() {
			if err := f.binaryCopy("initial-response", &in.InitialResponse); err != nil {
				return nil, err
			}
		}
		if f.next() {
			if err := f.string("hostname", &in.Hostname); err != nil {
				return nil, err
			}
		}
		return in, nil
	case DescSASLChallenge:
		c := &SASLChallenge{}
		if !f.next() {
			return nil, missing(name, "challenge")
		}
		return c, f.binaryCopy("challenge", &c.Challenge)
	case DescSASLResponse:
		r := &SASLResponse{}
		if !f.next() {
			return nil, missing(name, "response")
		}
		return r, f.binaryCopy("response", &r.Response)
	case DescSASLOutcome:
		o := &SASLOutcome{}
		if !f.next() {
			return nil, missing(name, "code")
		}
		v, err := f.d.ReadUint8()
		if err != nil {
			return nil, f.err("code", err)
		}
		if v > uint8(SASLSysTemp) {
			return nil, invalidField(name, "code", "unknown outcome code %d", v)
		}
		o.Code = SASLCode(v)
		if f.next() {
			if err := f.binaryCopy("additional-data", &o.AdditionalData); err != nil {
				return nil, err
			}
		}
		return o, nil
	}
	return nil, fmt.Errorf("frames: descriptor 0x%02x is not a SASL frame", code)
}
