package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// completeFlags offers values for the flags that have a fixed set of them
// to shell completion ("kvbreaker completion bash|zsh|fish").
func completeFlags(cmd *cobra.Command) {
	fixed := func(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return values, cobra.ShellCompDirectiveNoFileComp
		}
	}
	for name, values := range map[string][]string{
		"backend": publicBackends,
		"format":  {"table", "json"},
		"state":   {"open", "half-open", "closed"},
	} {
		if cmd.Flags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, fixed(values...))
		}
	}
}

// wrap fills text into lines of at most width characters, ending in a
// newline.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(text) {
		if i > 0 && n+1+len(w) > width {
			b.WriteString("\n")
			n = 0
		} else if i > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String() + "\n"
}
