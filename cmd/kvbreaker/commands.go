//go:build !simulateonly

package main

import "github.com/spf13/cobra"

// storeCommands are the commands that open a store, and with it a
// backend's SDK; the simulate-only build (-tags simulateonly, make demo)
// leaves them out so that its first build compiles no SDK.
func storeCommands(stopSignals func()) []*cobra.Command {
	return []*cobra.Command{
		newCheckCmd(stopSignals),
		newListCmd(),
		newInspectCmd(),
		newResetCmd(),
		newInitCmd(),
		newServeCmd(),
		newDashboardCmd(),
	}
}
