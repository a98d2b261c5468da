package main

import (
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/busbar-io/busbar/consistent"
	"github.com/busbar-io/busbar/processor"
)

// FireAt is a shot at a position of a game's range.
type FireAt struct {
	GameID   string `json:"gameId"`
	Position int    `json:"position"`
}

// Result is what a shot publishes: a Hit or a Missed (the Subject).
type Result struct {
	ID       string `json:"id"`
	GameID   string `json:"gameId"`
	Position int    `json:"position"`
}

// ShootingRange is a game's state: where the target is and how many shots
// were fired at it in this round.
type ShootingRange struct {
	TargetPosition   int `json:"targetPosition"`
	NumberOfAttempts int `json:"numberOfAttempts"`
}

// handler returns the game's message handler: a shot at the target is a
// Hit, any other a Missed; after maxAttempts shots the target moves to a
// position drawn from the Context's random source. The result's id comes
// from the Context too, so a duplicate shot publishes the very same result.
func handler(maxAttempts int) consistent.Handler[ShootingRange] {
	return func(c *consistent.Context, r ShootingRange, m *azservicebus.ReceivedMessage) (ShootingRange, []*azservicebus.Message, error) {
		var shot FireAt
		if err := json.Unmarshal(m.Body, &shot); err != nil {
			return r, nil, processor.Permanent(fmt.Errorf("FireAt: %w", err))
		}
		kind := "Missed"
		if shot.Position == r.TargetPosition {
			kind = "Hit"
		}
		body, err := json.Marshal(Result{ID: c.NewID(), GameID: shot.GameID, Position: shot.Position})
		if err != nil {
			return r, nil, err
		}
		out := &azservicebus.Message{Subject: &kind, Body: body, ApplicationProperties: map[string]any{"GameId": shot.GameID}}
		if r.NumberOfAttempts+1 >= maxAttempts {
			r.NumberOfAttempts = 0
			r.TargetPosition = c.Random().IntN(100)
		} else {
			r.NumberOfAttempts++
		}
		return r, []*azservicebus.Message{out}, nil
	}
}
