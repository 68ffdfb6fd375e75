package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
)

// TokenEnv is the environment variable the cloudflarekv backend reads its
// API token from (Cloudflare's own name). There is deliberately no flag: a
// flag's value shows in ps and shell history.
const TokenEnv = "CLOUDFLARE_API_TOKEN"

var cloudflarekvBackend = backendDesc{
	name:  "cloudflarekv",
	title: "Workers KV",
	about: "(Cloudflare Workers KV)",
	flags: []connFlag{
		{name: "cf-account", env: "KVBREAKER_CLOUDFLARE_ACCOUNT_ID", usage: "cloudflarekv: the account ID", need: true},
		{name: "cf-namespace", env: "KVBREAKER_CLOUDFLARE_NAMESPACE_ID", usage: "cloudflarekv: the Workers KV namespace ID", need: true},
		{name: "cf-base-url", env: "KVBREAKER_CLOUDFLARE_BASE_URL", usage: "cloudflarekv: API base `URL` override, e.g. a local Miniflare's http://127.0.0.1:8787/client/v4/", secret: true, check: checkWith(adapter.CheckHTTPURL, redactURL)},
	},
	usage: `--cf-account ACCOUNT_ID --cf-namespace NAMESPACE_ID
[--cf-base-url http://127.0.0.1:8787/client/v4/]`,
	envHelp: `  CLOUDFLARE_API_TOKEN
                 the Workers KV API token (Workers KV Storage: Edit); never a flag
`,
	secretEnv:  []string{TokenEnv},
	open:       openCloudflareKV,
	noTable:    "cloudflarekv needs no table: the Breakers' keys go into the Workers KV namespace --cf-namespace names, which init does not create (wrangler kv namespace create NAME)",
	example:    "--cf-account 0123abcd --cf-namespace 4567ef89",
	exampleEnv: TokenEnv + "=...",
}

// openCloudflareKV opens Workers KV (cloudflarekv.Dial: a refused token,
// account or namespace fails there, in words that say what to check).
func openCloudflareKV(ctx context.Context, f *backendFlags) (*conn, error) {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return nil, fmt.Errorf("cloudflarekv: %s is not set: export an API token with Workers KV Storage: Edit permission", TokenEnv)
	}
	s, err := cloudflarekv.Dial(ctx, f.get("cf-account"), f.get("cf-namespace"), token, f.get("cf-base-url"),
		// The padding covers --clock-skew; the store refuses a zero
		// padding (it would declare no bound), so 0 pads by 1 ms.
		cloudflarekv.WithClockSkew(max(f.clockSkew, time.Millisecond)),
		// A write the store gives up is reported by the command.
		cloudflarekv.WithLogger(slog.New(slog.DiscardHandler)),
		cloudflarekv.WithSetting("$"+TokenEnv, f.name("cf-account"), f.name("cf-namespace")))
	return opened(s, err)
}
