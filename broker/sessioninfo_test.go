package broker

import (
	"fmt"
	"testing"
	"time"
)

func TestSessionsDescribesEachSession(t *testing.T) {
	e := newEnv(t)
	e.queue("s", QueueProperties{RequiresSession: true})
	e.send("s", &Message{Body: []byte("1"), SessionID: "a"}, &Message{Body: []byte("2"), SessionID: "a"}, &Message{Body: []byte("3"), SessionID: "b"})
	c, err := e.b.AcceptSession(e.ctx, "s", "c", ConsumerOptions{Deliver: func(*Message) {}})
	e.must(err)
	e.must(e.b.SetSessionState(e.ctx, "s", "c", []byte("state")))
	e.clk.Advance(time.Second)

	ss, err := e.b.Sessions(e.ctx, "s", 0, 0)
	e.must(err)
	lock := t0.Add(time.Minute).UTC() // the default lock duration, from when c accepted it
	want := []SessionInfo{{ID: "a", MessageCount: 2}, {ID: "b", MessageCount: 1},
		{ID: "c", HasState: true, StateUpdated: t0.UTC(), LockedUntil: lock}}
	if fmt.Sprint(ss) != fmt.Sprint(want) {
		t.Fatalf("Sessions:\n got %v\nwant %v", ss, want)
	}
	if ss, _ := e.b.Sessions(e.ctx, "s", 1, 1); len(ss) != 1 || ss[0].ID != "b" {
		t.Fatalf("page 2 of 1: %v", ss)
	}
	e.must(c.Close())
	ss, _ = e.b.Sessions(e.ctx, "s", 2, 0)
	if len(ss) != 1 || !ss[0].LockedUntil.IsZero() {
		t.Fatalf("after release: %v", ss)
	}
	e.queue("plain", QueueProperties{})
	if _, err := e.b.Sessions(e.ctx, "plain", 0, 0); err == nil {
		t.Fatal("Sessions of a queue without sessions")
	}
}
