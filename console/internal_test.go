package console

import (
	"strings"
	"testing"
	"time"

	"github.com/busbar-io/busbar/broker"
)

func FuzzCredentials(f *testing.F) {
	f.Add("Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=abc=;UseDevelopmentEmulator=true")
	f.Add("Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders")
	f.Add(";;=;SharedAccessKey")
	f.Fuzz(func(t *testing.T, cs string) {
		c := credentials{ConnectionString: cs}
		err := c.resolve()
		if err == nil && (c.KeyName == "" || c.Key == "") {
			t.Fatalf("%q resolved to %+v", cs, c)
		}
		if err != nil && statusOf(err) != 400 {
			t.Fatalf("%q: status %d", cs, statusOf(err))
		}
	})
}

func TestCredentials(t *testing.T) {
	c := credentials{ConnectionString: "Endpoint=sb://h/;SharedAccessKeyName=k;SharedAccessKey=a=b=;EntityPath=orders"}
	if err := c.resolve(); err != nil || c.KeyName != "k" || c.Key != "a=b=" || c.EntityPath != "orders" {
		t.Fatalf("%+v %v", c, err)
	}
	c = credentials{ConnectionString: "Endpoint=sb://h/;SharedAccessSignature=SharedAccessSignature sr=x"}
	if err := c.resolve(); err == nil || !strings.Contains(err.Error(), "no SharedAccessKeyName") {
		t.Fatalf("a SAS connection string: %v", err)
	}
}

// TestSamplerRing checks rates and the hour's ring wrapping around.
func TestSamplerRing(t *testing.T) {
	s := newSampler(3)
	t0 := time.Unix(1000, 0)
	for i, x := range []struct{ in, out float64 }{{10, 0}, {30, 10}, {60, 40}, {60, 40}} {
		s.add("q", t0.Add(time.Duration(i)*10*time.Second), broker.RuntimeInfo{ActiveMessageCount: int64(i)}, x.in, x.out)
	}
	got := s.series("q")
	if len(got) != 3 || got[0].T != 1010 || got[2].T != 1030 {
		t.Fatalf("series %+v", got)
	}
	if got[0].In != 2 || got[0].Out != 1 || got[1].In != 3 || got[1].Out != 3 || got[2].In != 0 || got[2].Active != 3 {
		t.Fatalf("rates %+v", got)
	}
	if in, out := s.rates("q"); in != 0 || out != 0 {
		t.Fatalf("last rates %v %v", in, out)
	}
	if len(s.series("other")) != 0 {
		t.Fatal("an unknown entity has samples")
	}
}
