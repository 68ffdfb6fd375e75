package main

import (
	"context"
	"fmt"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// A sqlStore is a postgres or a mysql Store, P its module's Prepared: the
// modules agree in shape, and the command opens, checks and prepares both
// by one path.
type sqlStore[P fmt.Stringer] interface {
	driver.Store
	String() string
	Ping(ctx context.Context) error
	Prepare(ctx context.Context) (P, error)
	Explain(err error) error
	Close() error
}

// openSQL is the open of a backend whose store dial opens: it checks that
// the server answers and the table exists (Ping). A refusal is explained
// naming the flag dial gave the store (WithSetting).
func openSQL[S sqlStore[P], P fmt.Stringer](dial func(context.Context, *backendFlags) (S, error)) func(context.Context, *backendFlags) (*conn, error) {
	return func(ctx context.Context, f *backendFlags) (*conn, error) {
		s, err := dial(ctx, f)
		if err != nil {
			return nil, err
		}
		if err := s.Ping(ctx); err != nil {
			s.Close()
			return nil, s.Explain(err)
		}
		return opened(s, nil)
	}
}

// purgedRows is the leftBehind of a backend whose rows stay until a purge.
func purgedRows(backend string) string {
	return fmt.Sprintf("records expire within 10 minutes, but the rows stay until a purge (%s.Store.Purge, which the fleet's stores run every %d writes) removes them", backend, adapter.DefaultPurge.Every)
}

// initSQL is the create of a backend whose store dial opens: it makes the
// table ready (Prepare) and says whether it existed.
func initSQL[S sqlStore[P], P fmt.Stringer](dial func(context.Context, *backendFlags) (S, error), existed func(P) bool) func(context.Context, *backendFlags) (initOutput, error) {
	return func(ctx context.Context, f *backendFlags) (initOutput, error) {
		s, err := dial(ctx, f)
		if err != nil {
			return initOutput{}, err
		}
		defer s.Close()
		p, err := s.Prepare(ctx)
		return prepared(ctx, f, s.String(), p, existed(p), err, s.Explain)
	}
}
