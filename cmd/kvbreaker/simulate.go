package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/kvbreaker/kvbreaker/internal/output"
	"github.com/kvbreaker/kvbreaker/internal/simulate"
)

// newSimulateCmd is simulate in the command tree; its flags, run and
// report are package simulate's, which the demo build shares.
func newSimulateCmd() *cobra.Command {
	// The progress line goes where every command's would: a terminal as
	// the command recognises one.
	f := simulate.Flags{Terminal: output.IsTerminal}
	cmd := &cobra.Command{
		Use:     "simulate [flags]",
		Short:   "replay hours of fleet traffic in seconds and compare breaker models",
		Long:    simulate.Long + "\n" + simulate.Footer,
		Example: simulate.Example,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := simulate.Run(&f, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if ue, ok := errors.AsType[*simulate.UsageError](err); ok {
				return usagef("%s", ue.Msg)
			}
			return err
		},
	}
	f.Register(cmd.Flags())
	completeFlags(cmd)
	return cmd
}

// num formats n with thousands separators.
func num(n int) string { return simulate.Num(n) }
