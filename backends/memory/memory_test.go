package memory_test

import (
	"context"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/core"
)

// harness makes a fresh memory store per case, on real time.
type harness struct{}

func (harness) MakeStore(context.Context) (core.Store, error) { return memory.New(), nil }
func (harness) Close()                                        {}

func TestConformance(t *testing.T) {
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) { return harness{}, nil })
}
