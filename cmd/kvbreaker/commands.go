package main

import "github.com/spf13/cobra"

// rootStores ends the root help's sentence on stores: the backends, and
// what init creates.
var rootStores = ": " + titles(func(d *backendDesc) bool { return d != &memoryBackend }) +
	", or memory (a demo inside the process). \"kvbreaker init\" creates what " +
	titles(func(d *backendDesc) bool { return d.create != nil }) + " need"

// storeCommands are the commands that open a store. make demo builds
// simulate alone (the root module's internal/demo), so its first build
// compiles no SDK.
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
