module github.com/kvbreaker/kvbreaker

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/spf13/pflag v1.0.10
	golang.org/x/net v0.62.0
)

require golang.org/x/text v0.43.0 // indirect
