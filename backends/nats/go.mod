module github.com/kvbreaker/kvbreaker/backends/nats

go 1.26.0

require (
	github.com/kvbreaker/kvbreaker v0.1.0
	github.com/nats-io/nats.go v1.55.0
	go.uber.org/goleak v1.3.0
)
