module github.com/kvbreaker/kvbreaker/backends/cloudflarekv

go 1.26.0

require (
	github.com/cloudflare/cloudflare-go/v6 v6.10.0
	github.com/kvbreaker/kvbreaker v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.24.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/tidwall/gjson v1.14.4 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
