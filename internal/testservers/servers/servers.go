// Package servers starts the integration matrix's real servers together for
// tests that need all of them (bench, cmd/kvbreaker): etcd, dynalite and
// Miniflare, all on 127.0.0.1. Callers create their DynamoDB table (with
// dynamodb.CreateTable), which keeps this package free of client SDKs.
package servers

import (
	"context"
	"errors"
	"fmt"

	"github.com/kvbreaker/kvbreaker/internal/testservers/dynalite"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
)

// Set is the three running servers.
type Set struct {
	Etcd      *etcdtest.Server
	Dynalite  *dynalite.Server
	Miniflare *miniflare.Server
}

// Start launches the servers concurrently (each takes a few seconds). On
// error it stops whatever did start.
func Start(ctx context.Context) (*Set, error) {
	s := &Set{}
	errs := make(chan error, 3)
	go func() {
		var err error
		s.Etcd, err = etcdtest.Start(ctx)
		errs <- wrap("etcd", err)
	}()
	go func() {
		var err error
		s.Dynalite, err = dynalite.Start(ctx)
		errs <- wrap("dynalite", err)
	}()
	go func() {
		var err error
		s.Miniflare, err = miniflare.Start(ctx)
		errs <- wrap("miniflare", err)
	}()
	err := errors.Join(<-errs, <-errs, <-errs)
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop stops every server that is running, by the fixtures' own PIDs.
func (s *Set) Stop() {
	if s.Etcd != nil {
		s.Etcd.Close()
	}
	if s.Dynalite != nil {
		s.Dynalite.Stop()
	}
	if s.Miniflare != nil {
		s.Miniflare.Stop()
	}
	*s = Set{}
}

func wrap(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cannot start %s: %w", name, err)
}
