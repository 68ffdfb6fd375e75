module github.com/kvbreaker/kvbreaker/backends/nats

go 1.26.0

require (
	github.com/kvbreaker/kvbreaker v0.1.0
	github.com/nats-io/nats.go v1.55.0
	github.com/nats-io/nuid v1.0.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
