package main

import (
	"flag"
	"fmt"
	"os"
)

func flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("nats-server", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: natsserver [nats-server options]; see nats-server --help")
		fs.PrintDefaults()
	}
	return fs
}
