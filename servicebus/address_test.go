package servicebus

import (
	"strings"
	"testing"
)

func TestParseAddress(t *testing.T) {
	for in, want := range map[string]Address{
		"orders":                  {Node: NodeEntity, Entity: "orders"},
		"/Orders/":                {Node: NodeEntity, Entity: "Orders"},
		"site1/myQueue":           {Node: NodeEntity, Entity: "site1/myQueue"},
		"$cbs":                    {Node: NodeCBS},
		"$CBS":                    {Node: NodeCBS},
		"orders/$management":      {Node: NodeManagement, Entity: "orders"},
		"orders/$DeadLetterQueue": {Node: NodeEntity, Entity: "orders", SubQueue: SubQueueDeadLetter},
		"orders/$deadletterqueue": {Node: NodeEntity, Entity: "orders", SubQueue: SubQueueDeadLetter},
		"t/Subscriptions/s1":      {Node: NodeEntity, Entity: "t/Subscriptions/s1"},
		"t/subscriptions/s1/$DeadLetterQueue/$management": {Node: NodeManagement, Entity: "t/subscriptions/s1", SubQueue: SubQueueDeadLetter},
		"orders/$Transfer/$DeadLetterQueue":               {Node: NodeEntity, Entity: "orders", SubQueue: SubQueueTransferDeadLetter},
		"amqps://ns.servicebus.windows.net/orders":        {Node: NodeEntity, Entity: "orders"},
		"amqp://localhost:5672/orders/$management":        {Node: NodeManagement, Entity: "orders"},
	} {
		got, err := ParseAddress(in)
		if err != nil || got != want {
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
}

func TestParseAddressErrors(t *testing.T) {
	for in, why := range map[string]string{
		"":                        "empty",
		"/":                       "does not name an entity",
		"$management":             "does not name an entity",
		"amqps://host":            "no entity",
		"q/$DeadLetterQueue/x":    "does not name an entity",
		strings.Repeat("a", 3000): "too long",
	} {
		if _, err := ParseAddress(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("ParseAddress(%.20q) error = %v, want %q", in, err, why)
		}
	}
}

func TestAddressPath(t *testing.T) {
	a, _ := ParseAddress("t/Subscriptions/s/$Transfer/$DeadLetterQueue/$management")
	if got := a.Path(); got != "t/Subscriptions/s/$Transfer/$DeadLetterQueue" {
		t.Fatalf("Path = %q", got)
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"orders", "$cbs", "amqp://h/q/$management", "t/Subscriptions/s/$Transfer/$DeadLetterQueue"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		if a.Node != NodeCBS && (a.Entity == "" || strings.Contains(a.Entity, "$")) {
			t.Fatalf("ParseAddress(%q) = %+v: entity must be non-empty and free of $", s, a)
		}
	})
}
