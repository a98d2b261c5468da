package sas

import (
	"strings"
	"testing"
)

func TestParseConnectionString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ConnectionString
	}{
		{"Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=Root;SharedAccessKey=a+b/c==;UseDevelopmentEmulator=true",
			ConnectionString{Endpoint: "sb://127.0.0.1:5672", KeyName: "Root", Key: "a+b/c==", Emulator: true}},
		{" endpoint = sb://h ; sharedaccesskeyname=k;SHAREDACCESSKEY=x=y; EntityPath=orders;;junk;UseDevelopmentEmulator=1",
			ConnectionString{Endpoint: "sb://h", KeyName: "k", Key: "x=y", EntityPath: "orders", Emulator: true}},
		{"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=false",
			ConnectionString{Endpoint: "sb://ns.servicebus.windows.net/", KeyName: "k", Key: "v"}},
		{"", ConnectionString{}},
	} {
		if got := ParseConnectionString(tc.in); got != tc.want {
			t.Errorf("ParseConnectionString(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestReplaceField(t *testing.T) {
	cs := "Endpoint=sb://h:5672/; sharedaccesskeyname=k;SharedAccessKey=v=;UseDevelopmentEmulator=true"
	got := ReplaceField(cs, "Endpoint", "sb://h:5300")
	if want := "Endpoint=sb://h:5300; sharedaccesskeyname=k;SharedAccessKey=v=;UseDevelopmentEmulator=true"; got != want {
		t.Fatalf("endpoint replaced: %q, want %q", got, want)
	}
	// Names match case-insensitively; a value keeps its own '='.
	if got := ReplaceField(cs, "SharedAccessKeyName", "w"); ParseConnectionString(got).KeyName != "w" || ParseConnectionString(got).Key != "v=" {
		t.Fatalf("key name replaced: %q", got)
	}
	// A field the string lacks is not added.
	if got := ReplaceField(cs, "EntityPath", "q"); got != cs {
		t.Fatalf("absent field: %q, want %q unchanged", got, cs)
	}
}

// formatConnectionString writes cs back as a connection string.
func formatConnectionString(cs ConnectionString) string {
	s := "Endpoint=" + cs.Endpoint + ";SharedAccessKeyName=" + cs.KeyName + ";SharedAccessKey=" + cs.Key + ";EntityPath=" + cs.EntityPath
	if cs.Emulator {
		s += ";UseDevelopmentEmulator=true"
	}
	return s
}

func FuzzParseConnectionString(f *testing.F) {
	for _, s := range []string{
		"Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=Root;SharedAccessKey=a+b/c==;UseDevelopmentEmulator=true",
		" endpoint = sb://h ; sharedaccesskeyname=k;SHAREDACCESSKEY=x=y; EntityPath=orders;;junk;UseDevelopmentEmulator=1",
		"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=false",
		"", ";", "=", "Endpoint", "Endpoint=", "Endpoint=a;Endpoint=b", "SharedAccessKey= \t=v= ", "UseDevelopmentEmulator=TRUE",
		"Endpoİnt=sb://a", "ſharedAccessKey=x",
	} {
		f.Add(s, "sb://other:5300")
	}
	f.Add("Endpoint=sb://h;SharedAccessKey=k", "")
	fields := []struct {
		name string
		get  func(ConnectionString) string
	}{
		{"Endpoint", func(c ConnectionString) string { return c.Endpoint }},
		{"SharedAccessKeyName", func(c ConnectionString) string { return c.KeyName }},
		{"SharedAccessKey", func(c ConnectionString) string { return c.Key }},
		{"EntityPath", func(c ConnectionString) string { return c.EntityPath }},
	}
	f.Fuzz(func(t *testing.T, s, value string) {
		cs := ParseConnectionString(s)
		// Values are trimmed and come from one pair of s.
		for _, fd := range fields {
			v := fd.get(cs)
			if v != strings.TrimSpace(v) || strings.Contains(v, ";") || !strings.Contains(s, v) {
				t.Fatalf("ParseConnectionString(%q): %s %q", s, fd.name, v)
			}
		}
		// What is read writes back and reads the same.
		if back := ParseConnectionString(formatConnectionString(cs)); back != cs {
			t.Fatalf("ParseConnectionString(%q) = %+v; written out and read back %+v", s, cs, back)
		}
		// ReplaceField changes the field it names, only that one; a field s
		// has (read with a value) is replaced, one s lacks is not added.
		value = strings.TrimSpace(strings.ReplaceAll(value, ";", ""))
		for _, fd := range fields {
			r := ReplaceField(s, fd.name, value)
			got := ParseConnectionString(r)
			want := cs
			switch fd.name {
			case "Endpoint":
				want.Endpoint = value
			case "SharedAccessKeyName":
				want.KeyName = value
			case "SharedAccessKey":
				want.Key = value
			case "EntityPath":
				want.EntityPath = value
			}
			if r == s && fd.get(cs) == "" {
				want = cs // absent (or empty): not added
			}
			if got != want {
				t.Fatalf("ReplaceField(%q, %s, %q) = %q, read as %+v; want %+v", s, fd.name, value, r, got, want)
			}
		}
	})
}
