module github.com/kvbreaker/kvbreaker/backends/mysql

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/kvbreaker/kvbreaker v0.1.0
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/anishathalye/porcupine v1.3.1 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
