package queues

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// Message is one delivery as a queue carries it (JSON in a task's or job's
// payload).
type Message struct {
	// ID names the message: unique, as a parking set keeps one of equal
	// members (parking.go), and for the inbox to drop a repeat (queues
	// deliver at least once).
	ID string `json:"id"`
	// Inbox is the URL the body is POSTed to.
	Inbox string `json:"inbox"`
	Body  []byte `json:"body"`
	// HeldSince is when the Breaker first held this message (zero until
	// then). It travels with the message so that HoldLimit counts from the
	// first hold across every requeue, worker and restart.
	HeldSince time.Time `json:"held_since,omitzero"`
}

// Outcome is what Deliver did with a message.
type Outcome int

const (
	// Delivered: the inbox answered 2xx.
	Delivered Outcome = iota
	// Held: the Breaker restrains the inbox's host; requeue the message
	// (with its new HeldSince) at the returned instant.
	Held
	// Dropped: the message was held for HoldLimit; it is not requeued.
	Dropped
)

// Deliver POSTs m to its inbox through client, whose Transport is an
// httpbreaker.Transport. It returns Held with the instant to requeue m at
// (m.HeldSince updated) when the Breaker holds it, Dropped when HoldLimit
// ran out, and an error for a failed delivery, which the queue retries as
// it retries any failed job (the Breaker has recorded the failure).
func Deliver(ctx context.Context, client *http.Client, m *Message) (Outcome, time.Time, error) {
	if !m.HeldSince.IsZero() {
		ctx = kvbreaker.WithHeldSince(ctx, m.HeldSince)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.Inbox, bytes.NewReader(m.Body))
	if err != nil {
		return Delivered, time.Time{}, err
	}
	req.Header.Set("Content-Type", "application/activity+json")
	resp, err := client.Do(req)
	// client.Do wraps the Transport's error in a *url.Error, which
	// errors.As looks through.
	if held, ok := errors.AsType[*kvbreaker.HeldError](err); ok {
		m.HeldSince = held.HeldSince
		if held.Decision == kvbreaker.Drop {
			return Dropped, time.Time{}, nil
		}
		return Held, held.RetryAt, nil
	}
	if err != nil {
		return Delivered, time.Time{}, err
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return Delivered, time.Time{}, fmt.Errorf("POST %s: %s", m.Inbox, resp.Status)
	}
	return Delivered, time.Time{}, nil
}
