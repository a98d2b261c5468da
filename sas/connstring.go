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
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "endpoint":
			cs.Endpoint = v
		case "sharedaccesskeyname":
			cs.KeyName = v
		case "sharedaccesskey":
			cs.Key = v
		case "entitypath":
			cs.EntityPath = v
		case "usedevelopmentemulator":
			cs.Emulator = strings.EqualFold(v, "true") || v == "1"
		}
	}
	return cs
}
