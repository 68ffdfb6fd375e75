package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// A sqlStore is a postgres or a mysql Store, P its module's Prepared: the
// modules agree in shape, and the command opens, checks and prepares both
// by one path.
type sqlStore[P fmt.Stringer] interface {
	driver.Store
	String() string
	Endpoint() string
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
			f.endpoint = s.Endpoint()
			return nil, s.Explain(err)
		}
		return &conn{describe: s.String(), store: s,
			leftBehind: "records expire within 10 minutes, but the rows stay until a purge (" + f.desc.name + ".Store.Purge, which the fleet's stores run every " + strconv.Itoa(adapter.DefaultPurge.Every) + " writes) removes them"}, nil
	}
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
		return prepared(ctx, f, s.String(), s.Endpoint(), p, existed(p), err, s.Explain)
	}
}
