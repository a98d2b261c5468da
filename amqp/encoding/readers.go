package encoding

import "encoding/binary"

// ReadFields reads a fields map (symbol keys). Null reads as nil.
func (d *Decoder) ReadFields() (Fields, error) {
	if d.ReadNull() {
		return nil, nil
	}
	c, n, err := d.ReadMap()
	if err != nil {
		return nil, err
	}
	f := make(Fields, n)
	for range n {
		at := c.Offset()
		k, err := c.ReadValue()
		if err != nil {
			return nil, err
		}
		var key Symbol
		switch k := k.(type) {
		case Symbol:
			key = k
		case string: // tolerated: some clients send string keys
			key = Symbol(k)
		default:
			return nil, &Error{Offset: at, What: "fields key is " + typeName(k) + ", want symbol"}
		}
		if f[key], err = c.ReadValue(); err != nil {
			return nil, err
		}
	}
	return f, c.expectEnd("map")
}

// ReadAnnotations reads an annotations map (keys symbol or ulong). Null
// reads as nil.
func (d *Decoder) ReadAnnotations() (Annotations, error) {
	return d.readAnnotations(false)
}

// ReadStringKeyedAnnotations is ReadAnnotations that also takes string
// keys, read as symbols: the Java SDK (proton-j) writes the
// message-annotations of a modified outcome (abandon or defer with
// properties to modify) with string keys, and Service Bus takes them.
func (d *Decoder) ReadStringKeyedAnnotations() (Annotations, error) {
	return d.readAnnotations(true)
}

func (d *Decoder) readAnnotations(stringKeys bool) (Annotations, error) {
	if d.ReadNull() {
		return nil, nil
	}
	c, n, err := d.ReadMap()
	if err != nil {
		return nil, err
	}
	a := make(Annotations, n)
	for range n {
		at := c.Offset()
		k, err := c.ReadValue()
		if err != nil {
			return nil, err
		}
		switch s := k.(type) {
		case Symbol, uint64:
		case string:
			if !stringKeys {
				return nil, &Error{Offset: at, What: "annotations key is string, want symbol or ulong"}
			}
			k = Symbol(s)
		default:
			return nil, &Error{Offset: at, What: "annotations key is " + typeName(k) + ", want symbol or ulong"}
		}
		if a[k], err = c.ReadValue(); err != nil {
			return nil, err
		}
	}
	return a, c.expectEnd("map")
}

// ReadSymbolArray reads a multiple="true" symbol field: an array of symbols
// or a single symbol. Null reads as nil.
func (d *Decoder) ReadSymbolArray() ([]Symbol, error) {
	if d.ReadNull() {
		return nil, nil
	}
	code, err := d.Peek()
	if err != nil {
		return nil, err
	}
	if code == CodeSym8 || code == CodeSym32 {
		s, err := d.ReadSymbol()
		if err != nil {
			return nil, err
		}
		return []Symbol{s}, nil
	}
	at := d.off
	v, err := d.ReadValue()
	if err != nil {
		return nil, err
	}
	arr, ok := v.(Array)
	if !ok || arr.Descriptor != nil || (arr.Code != CodeSym8 && arr.Code != CodeSym32) {
		d.off = at
		return nil, d.errf(at, "expected symbol or array of symbols, found %s", typeName(v))
	}
	out := make([]Symbol, len(arr.Elems))
	for i, e := range arr.Elems {
		out[i] = e.(Symbol)
	}
	return out, nil
}

// Skip moves past one value of any type without decoding it.
func (d *Decoder) Skip() error {
	code, at, err := d.readCode()
	if err != nil {
		return err
	}
	return d.skipBody(at, code, 0)
}

func (d *Decoder) skipBody(at int, code byte, depth int) error {
	if w := fixedWidth(code); w >= 0 {
		_, err := d.take(w, codeName(code))
		return err
	}
	switch code {
	case CodeDescribed:
		if depth >= MaxDepth {
			return d.errf(at, "nesting deeper than %d", MaxDepth)
		}
		for range 2 { // descriptor, then value
			c, a, err := d.readCode()
			if err != nil {
				return err
			}
			if err := d.skipBody(a, c, depth+1); err != nil {
				return err
			}
		}
		return nil
	case CodeVbin8, CodeStr8, CodeSym8, CodeList8, CodeMap8, CodeArray8:
		return d.skipSized(at, 1, codeName(code))
	case CodeVbin32, CodeStr32, CodeSym32, CodeList32, CodeMap32, CodeArray32:
		return d.skipSized(at, 4, codeName(code))
	}
	return d.errf(at, "unknown format code 0x%02x", code)
}

func (d *Decoder) skipSized(at, width int, what string) error {
	if len(d.b)-d.off < width {
		return d.short(d.off, what+" size", width)
	}
	var n uint64
	if width == 1 {
		n = uint64(d.b[d.off])
	} else {
		n = uint64(binary.BigEndian.Uint32(d.b[d.off:]))
	}
	d.off += width
	if n > uint64(len(d.b)-d.off) {
		return d.errf(at, "%s of %d bytes exceeds the %d bytes left", what, n, len(d.b)-d.off)
	}
	d.off += int(n)
	return nil
}

// SkipValueBytes skips one value and returns its encoded bytes (aliasing the input).
func (d *Decoder) SkipValueBytes() ([]byte, error) {
	start := d.off
	if err := d.Skip(); err != nil {
		return nil, err
	}
	return d.b[start:d.off:d.off], nil
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case uint8:
		return "ubyte"
	case uint16:
		return "ushort"
	case uint32:
		return "uint"
	case uint64:
		return "ulong"
	case int8:
		return "byte"
	case int16:
		return "short"
	case int32:
		return "int"
	case int64:
		return "long"
	case float32:
		return "float"
	case float64:
		return "double"
	case string:
		return "string"
	case Symbol:
		return "symbol"
	case []byte:
		return "binary"
	case List:
		return "list"
	case Map:
		return "map"
	case Array:
		return "array"
	case *Described:
		return "described"
	}
	return "value"
}
