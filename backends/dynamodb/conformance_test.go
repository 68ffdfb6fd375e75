package dynamodb_test

import (
	"context"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/core"
)

// harness makes stores over the shared dynalite table, each under a key
// prefix no other store uses.
type harness struct{ t *testing.T }

func (h harness) MakeStore(context.Context) (core.Store, error) {
	return dynamodb.New(client, table, dynamodb.WithKeyPrefix(uniquePrefix(h.t)))
}

// Close: the table and server belong to TestMain.
func (harness) Close() {}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(_ context.Context, t *testing.T) (conformance.Harness, error) {
		return harness{t}, nil
	})
}
