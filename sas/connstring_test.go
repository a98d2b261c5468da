package sas

import "testing"

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
