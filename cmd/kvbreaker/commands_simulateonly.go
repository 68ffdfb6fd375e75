//go:build simulateonly

package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The simulate-only build (make demo): simulate alone, over the root
// module, so that a first run from empty caches compiles no backend SDK.
// `go build ./cmd/kvbreaker` without the tag is the full command.

func storeCommands(func()) []*cobra.Command { return nil }

// publicBackends is empty: no command of this build has --backend.
var publicBackends []string

// commandSecrets finds none: simulate takes no credential.
func commandSecrets(*pflag.FlagSet) []string { return nil }

func scrub(msg string, _ []string) string { return msg }
