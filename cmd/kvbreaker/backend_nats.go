package main

import (
	"context"
	"strings"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
)

var natsBackend = backendDesc{
	name:  "nats",
	title: "NATS",
	about: "(NATS JetStream key-value)",
	flags: []connFlag{
		{name: "nats-url", env: "KVBREAKER_NATS_URL", usage: "nats: comma-separated server `URL`s, e.g. nats://nats-1:4222,nats://nats-2:4222 (user information in a URL authenticates and is never shown)", secret: true,
			need: true, list: "URL", check: checkWith(kvnats.CheckURL, redactURL)},
		{name: "nats-bucket", env: "KVBREAKER_NATS_BUCKET", usage: "nats: the JetStream key-value bucket (created if missing)", value: "kvbreaker"},
	},
	usage:   "--nats-url nats://nats-1:4222,nats://nats-2:4222 [--nats-bucket kvbreaker]",
	open:    openNATS,
	wipes:   "a purge or a deleted message is seen when the stream's message or subject count falls between two heartbeats; one hidden by as many new keys created in the same heartbeat is not: restart the fleet's processes after removing messages by hand",
	example: "--nats-url nats://127.0.0.1:4222",
}

// openNATS dials the servers (nats.Dial, which says why none took the
// connection) and opens the bucket, creating it if it does not exist.
func openNATS(ctx context.Context, f *backendFlags) (*conn, error) {
	return opened(kvnats.Dial(ctx, strings.Join(f.list("nats-url"), ","), f.get("nats-bucket"), nil))
}
