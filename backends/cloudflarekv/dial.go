package cloudflarekv

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Dial opens a Store over the Workers KV namespace namespaceID of account
// accountID with a client of its own, authenticated by token (an API token
// with Workers KV Storage: Edit permission), talking to baseURL when it is
// not "" (a local Miniflare's http://127.0.0.1:8787/client/v4/; Cloudflare's
// API otherwise). A connection to baseURL is tried first, within 2 s, so
// that a closed port fails at once as a *driver.UnreachableError. Dial then reads
// one key that no Breaker writes, so that a wrong token, account or
// namespace fails here: that error is the read's *driver.OpError (Op
// "get"), which unwraps to the API's.
func Dial(ctx context.Context, accountID, namespaceID, token, baseURL string, opts ...Option) (*Store, error) {
	if token == "" {
		return nil, &driver.OptionError{Backend: "cloudflarekv", Option: "token", Value: `""`, Fix: "pass an API token with Workers KV Storage: Edit permission"}
	}
	ro := []option.RequestOption{option.WithAPIToken(token)}
	if baseURL != "" {
		if err := adapter.CheckDialURL(ctx, "cloudflarekv", baseURL, 2*time.Second); err != nil {
			return nil, err
		}
		if !strings.HasSuffix(baseURL, "/") {
			baseURL += "/"
		}
		ro = append(ro, option.WithBaseURL(baseURL))
	}
	s, err := New(kv.NewKVService(ro...), accountID, namespaceID, opts...)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.Get(ctx, "kvbreaker-connection-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		_ = s.Close() // ends the read this Get left running
		return nil, err
	}
	return s, nil
}
