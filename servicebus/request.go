package servicebus

import (
	"math"
	"time"

	"github.com/busbar-io/busbar/amqp/encoding"
	"github.com/busbar-io/busbar/amqp/message"
	"github.com/busbar-io/busbar/broker"
)

// request is a $cbs or $management request message.
type request struct {
	id       any // message-id, echoed as correlation-id with its type
	replyTo  string
	op       string
	appProps map[string]any
	value    any           // the amqp-value body
	body     fieldMap      // value as a map, when it is one
	timeout  time.Duration // server-timeout, 0 when absent
}

// fieldMap is a request map with string (or symbol) keys.
type fieldMap map[string]any

// maxRequestTimeout caps a client's server-timeout.
const maxRequestTimeout = 10 * time.Minute

// parseRequest decodes a request arriving on a link whose target is node,
// and takes the operation and timeout from the application properties. A
// request without a reply-to is answered on the client's reply link whose
// target is node itself: the Python SDK (pyamqp) attaches its request and
// reply links both with the node's address and sets no reply-to.
func parseRequest(payload []byte, node string) (*request, error) {
	p, err := message.Parse(payload)
	if err != nil {
		return nil, badRequest("the request is not a valid AMQP message: %v", err)
	}
	r := &request{appProps: p.ApplicationProperties}
	if p.Properties != nil {
		r.id, r.replyTo = p.Properties.MessageID, p.Properties.ReplyTo
	}
	if r.replyTo == "" {
		r.replyTo = node
	}
	r.op, _ = r.appProps["operation"].(string)
	for _, k := range []string{"server-timeout", "com.microsoft:server-timeout"} {
		if v, ok := r.appProps[k]; ok {
			if ms, ok := asInt64(v); ok && ms > 0 {
				r.timeout = min(time.Duration(ms)*time.Millisecond, maxRequestTimeout)
			}
		}
	}
	if p.Body.Kind == message.BodyValue {
		r.value = p.Body.Value
		if m, ok := p.Body.Value.(encoding.Map); ok {
			if r.body, err = toFieldMap(m); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// toFieldMap converts a map with string or symbol keys.
func toFieldMap(m encoding.Map) (fieldMap, error) {
	out := make(fieldMap, len(m))
	for _, p := range m {
		switch k := p.Key.(type) {
		case string:
			out[k] = p.Value
		case encoding.Symbol:
			out[string(k)] = p.Value
		default:
			return nil, badRequest("map key of type %T; keys must be strings or symbols", p.Key)
		}
	}
	return out, nil
}

// asInt64 converts any AMQP integer.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}

// elems returns the elements of an array or a list.
func elems(v any) ([]any, bool) {
	switch x := v.(type) {
	case encoding.Array:
		return x.Elems, true
	case encoding.List:
		return x, true
	}
	return nil, false
}

func (m fieldMap) str(key string) (string, error) {
	switch v := m[key].(type) {
	case string:
		return v, nil
	case encoding.Symbol:
		return string(v), nil
	case nil:
		return "", badRequest("the request lacks '%s'", key)
	default:
		return "", badRequest("'%s' is a %T, want a string", key, m[key])
	}
}

// optStr is str for an optional key: "" when absent or null.
func (m fieldMap) optStr(key string) (string, error) {
	if m[key] == nil {
		return "", nil
	}
	return m.str(key)
}

func (m fieldMap) int(key string, def int64) (int64, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return def, nil
	}
	n, ok := asInt64(v)
	if !ok {
		return 0, badRequest("'%s' is a %T, want an integer", key, v)
	}
	return n, nil
}

func (m fieldMap) longs(key string) ([]int64, error) {
	es, ok := elems(m[key])
	if !ok {
		return nil, badRequest("'%s' must be an array of longs", key)
	}
	out := make([]int64, len(es))
	for i, e := range es {
		if out[i], ok = asInt64(e); !ok {
			return nil, badRequest("'%s' element %d is a %T, want a long", key, i, e)
		}
	}
	return out, nil
}

func (m fieldMap) tokens(key string) ([]broker.LockToken, error) {
	es, ok := elems(m[key])
	if !ok {
		return nil, badRequest("'%s' must be an array of uuids", key)
	}
	out := make([]broker.LockToken, len(es))
	for i, e := range es {
		u, ok := e.(encoding.UUID)
		if !ok {
			return nil, badRequest("'%s' element %d is a %T, want a uuid", key, i, e)
		}
		out[i] = broker.LockToken(u)
	}
	return out, nil
}

// submap returns a nested map (nil when absent or null).
func (m fieldMap) submap(key string) (fieldMap, error) {
	switch v := m[key].(type) {
	case nil:
		return nil, nil
	case encoding.Map:
		return toFieldMap(v)
	default:
		return nil, badRequest("'%s' is a %T, want a map", key, m[key])
	}
}

// properties converts a map of application properties to values the broker
// keeps (see broker.Message.Properties).
func (m fieldMap) properties(key string) (map[string]any, error) {
	sub, err := m.submap(key)
	if err != nil || sub == nil {
		return nil, err
	}
	out := make(map[string]any, len(sub))
	for k, v := range sub {
		pv, ok := propertyValue(v)
		if !ok {
			return nil, badRequest("property '%s' of '%s' has unsupported type %T", k, key, v)
		}
		out[k] = pv
	}
	return out, nil
}
