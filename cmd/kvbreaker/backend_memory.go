package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker/backends/memory"
)

var memoryBackend = backendDesc{
	name:  "memory",
	title: "memory",
	usage: "no flags: a store inside this process, empty at start (a demo)",
	open:  func(context.Context, *backendFlags) (*conn, error) { return opened(memoryStore, nil) },
}

// memoryStore is the memory backend's store: one per process, so that the
// commands a test runs in one process see each other's writes.
var memoryStore = memory.New()
