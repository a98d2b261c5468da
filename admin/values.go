package admin

import (
	"encoding/hex"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/busbar-io/busbar/isoduration"
)

// maxKeyValues bounds the entries of one Parameters or Properties list.
const maxKeyValues = 1024

// decodeKeyValues reads a list of KeyValueOfstringanyType (SQL parameters,
// correlation-filter properties); prop names the list in errors. Each value
// carries its XML Schema type in xsi:type and becomes the Go type the
// broker's filters evaluate.
func decodeKeyValues(r *reader, prop string) (map[string]any, error) {
	out := map[string]any{}
	for {
		se, ok, err := r.child(prop)
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		if se.Name.Local != "KeyValueOfstringanyType" {
			return nil, badRequestf("%s: unexpected element <%s>, want KeyValueOfstringanyType", prop, se.Name.Local)
		}
		if len(out) == maxKeyValues {
			return nil, badRequestf("%s: more than %d entries", prop, maxKeyValues)
		}
		k, v, err := decodeKeyValue(r, prop)
		if err != nil {
			return nil, err
		}
		if _, dup := out[k]; dup {
			return nil, badRequestf("%s: key %q appears more than once", prop, k)
		}
		out[k] = v
	}
}

func decodeKeyValue(r *reader, prop string) (string, any, error) {
	var (
		key          string
		val          any
		haveK, haveV bool
		where        = prop + ".KeyValueOfstringanyType"
	)
	for {
		se, ok, err := r.child(where)
		if err != nil {
			return "", nil, err
		}
		if !ok {
			break
		}
		switch se.Name.Local {
		case "Key":
			if haveK {
				return "", nil, badRequestf("%s: Key appears more than once", where)
			}
			if key, err = r.text(where + ".Key"); err != nil {
				return "", nil, err
			}
			haveK = true
		case "Value":
			if haveV {
				return "", nil, badRequestf("%s: Value appears more than once", where)
			}
			typ, ok := instanceType(se)
			if !ok {
				return "", nil, badRequestf("%s: Value has no i:type attribute", where)
			}
			text, err := r.text(where + ".Value")
			if err != nil {
				return "", nil, err
			}
			haveV = true
			if val, err = parseTypedValue(typ, text); err != nil {
				return "", nil, badRequestf("%s: key %q: %v", prop, key, err)
			}
		default:
			return "", nil, badRequestf("%s: unexpected element <%s>", where, se.Name.Local)
		}
	}
	if !haveK || key == "" {
		return "", nil, badRequestf("%s: an entry has no Key", prop)
	}
	if !haveV {
		return "", nil, badRequestf("%s: key %q has no Value", prop, key)
	}
	return key, val, nil
}

// valueError is a description of a bad typed value (wrapped by the caller).
type valueError string

func (e valueError) Error() string { return string(e) }

// parseTypedValue converts the text of a value of XML Schema type typ.
func parseTypedValue(typ, s string) (any, error) {
	bad := func() (any, error) {
		return nil, valueError(strconv.Quote(truncate(s, 40)) + " is not a valid " + typ)
	}
	t := strings.TrimSpace(s)
	switch typ {
	case "string":
		return s, nil
	case "boolean":
		switch t {
		case "true", "1":
			return true, nil
		case "false", "0":
			return false, nil
		}
		return bad()
	case "byte", "short", "int", "long":
		bits := map[string]int{"byte": 8, "short": 16, "int": 32, "long": 64}[typ]
		n, err := strconv.ParseInt(t, 10, bits)
		if err != nil {
			return bad()
		}
		switch bits {
		case 8:
			return int8(n), nil
		case 16:
			return int16(n), nil
		case 32:
			return int32(n), nil
		}
		return n, nil
	case "unsignedByte", "unsignedShort", "unsignedInt", "unsignedLong":
		bits := map[string]int{"unsignedByte": 8, "unsignedShort": 16, "unsignedInt": 32, "unsignedLong": 64}[typ]
		n, err := strconv.ParseUint(t, 10, bits)
		if err != nil {
			return bad()
		}
		switch bits {
		case 8:
			return uint8(n), nil
		case 16:
			return uint16(n), nil
		case 32:
			return uint32(n), nil
		}
		return n, nil
	case "float", "double":
		bits := 64
		if typ == "float" {
			bits = 32
		}
		f, err := strconv.ParseFloat(t, bits)
		if err != nil {
			return bad()
		}
		if bits == 32 {
			return float32(f), nil
		}
		return f, nil
	case "dateTime":
		tm, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return bad()
		}
		return tm.UTC(), nil
	case "duration":
		d, err := isoduration.Parse(t)
		if err != nil {
			return bad()
		}
		return d, nil
	case "guid":
		b, err := hex.DecodeString(strings.ReplaceAll(t, "-", ""))
		if err != nil || len(b) != 16 || len(t) != 36 {
			return bad()
		}
		return dotnetGUID(b), nil
	}
	return nil, valueError("type " + strconv.Quote(typ) + " is not supported (use string, boolean, int, long, double, dateTime, duration or guid)")
}

// dotnetGUID converts between the canonical text order of a GUID's bytes
// and the order .NET keeps them in, which AMQP carries (the first three
// groups little-endian). It is its own inverse.
func dotnetGUID(b []byte) [16]byte {
	var g [16]byte
	copy(g[:], b)
	g[0], g[1], g[2], g[3] = b[3], b[2], b[1], b[0]
	g[4], g[5] = b[5], b[4]
	g[6], g[7] = b[7], b[6]
	return g
}

// typedValue returns the XML Schema type name, its namespace and the text
// of a value kept by the broker; ok is false for a Go type with no mapping.
func typedValue(v any) (typ, ns, text string, ok bool) {
	ns = nsSchema
	switch x := v.(type) {
	case string:
		return "string", ns, x, true
	case bool:
		return "boolean", ns, strconv.FormatBool(x), true
	case int8:
		return "byte", ns, strconv.FormatInt(int64(x), 10), true
	case int16:
		return "short", ns, strconv.FormatInt(int64(x), 10), true
	case int32:
		return "int", ns, strconv.FormatInt(int64(x), 10), true
	case int64:
		return "long", ns, strconv.FormatInt(x, 10), true
	case int:
		return "long", ns, strconv.FormatInt(int64(x), 10), true
	case uint8:
		return "unsignedByte", ns, strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return "unsignedShort", ns, strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return "unsignedInt", ns, strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return "unsignedLong", ns, strconv.FormatUint(x, 10), true
	case uint:
		return "unsignedLong", ns, strconv.FormatUint(uint64(x), 10), true
	case float32:
		return "float", ns, formatFloat(float64(x), 32), true
	case float64:
		return "double", ns, formatFloat(x, 64), true
	case time.Time:
		return "dateTime", ns, x.UTC().Format(time.RFC3339Nano), true
	case time.Duration:
		return "duration", ns, isoduration.Format(x), true
	case [16]byte:
		g := dotnetGUID(x[:])
		h := hex.EncodeToString(g[:])
		return "guid", nsSerial, h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
	}
	return "", "", "", false
}

func formatFloat(f float64, bits int) string {
	switch {
	case math.IsInf(f, 1):
		return "INF"
	case math.IsInf(f, -1):
		return "-INF"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// writeKeyValues writes a Parameters or Properties list in key order. The
// type prefix is five characters ("d6p1:"), as the service writes it and as
// the JS client's parser assumes.
func writeKeyValues(w *writer, name string, m map[string]any) {
	if len(m) == 0 {
		return
	}
	w.open(name)
	for _, k := range sortedKeys(m) {
		typ, ns, text, ok := typedValue(m[k])
		if !ok {
			continue
		}
		w.open("KeyValueOfstringanyType")
		w.text("Key", k)
		w.textAttr("Value", text, "i:type", "d6p1:"+typ, "xmlns:d6p1", ns)
		w.close("KeyValueOfstringanyType")
	}
	w.close(name)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
