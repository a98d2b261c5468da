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
