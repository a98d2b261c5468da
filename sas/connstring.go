package sas

import "strings"

// ConnectionString is what a Service Bus connection string carries:
// "Endpoint=sb://host;SharedAccessKeyName=…;SharedAccessKey=…[;EntityPath=…][;UseDevelopmentEmulator=true]".
type ConnectionString struct {
	Endpoint   string // as written, e.g. "sb://127.0.0.1:5672"
	KeyName    string
	Key        string
	EntityPath string
	Emulator   bool // UseDevelopmentEmulator=true
}

// ReplaceField returns the connection string s with the value of its field
// name (case-insensitive) replaced by value; the other fields are kept as
// written, a field s lacks is not added.
func ReplaceField(s, name, value string) string {
	parts := strings.Split(s, ";")
	for i, part := range parts {
		if k, _, ok := strings.Cut(part, "="); ok && strings.EqualFold(strings.TrimSpace(k), name) {
			parts[i] = name + "=" + value
		}
	}
	return strings.Join(parts, ";")
}

// ParseConnectionString reads the key=value pairs of a connection string:
// names are case-insensitive, spaces around a pair are ignored, a value may
// contain '=' (base64 keys do), and unknown names are skipped. It checks
// nothing else: each caller says which fields it needs.
func ParseConnectionString(s string) ConnectionString {
	var cs ConnectionString
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		// Names match as in ReplaceField, so that the field it replaces is
		// the one read here.
		is := func(name string) bool { return strings.EqualFold(strings.TrimSpace(k), name) }
		switch {
		case is("Endpoint"):
			cs.Endpoint = v
		case is("SharedAccessKeyName"):
			cs.KeyName = v
		case is("SharedAccessKey"):
			cs.Key = v
		case is("EntityPath"):
			cs.EntityPath = v
		case is("UseDevelopmentEmulator"):
			cs.Emulator = strings.EqualFold(v, "true") || v == "1"
		}
	}
	return cs
}
