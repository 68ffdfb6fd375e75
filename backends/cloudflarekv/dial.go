package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// defaultBaseURL is cloudflare-go's API base URL, for messages.
const defaultBaseURL = "https://api.cloudflare.com/client/v4/"

// Dial opens a Store over the Workers KV namespace namespaceID of account
// accountID with a client of its own, authenticated by token (an API token
// with Workers KV Storage: Edit permission), talking to baseURL when it is
// not "" (a local Miniflare's http://127.0.0.1:8787/client/v4/; Cloudflare's
// API otherwise). A connection to baseURL is tried first, within 2 s, so
// that a closed port fails at once as a *driver.UnreachableError. Dial then reads
// one key that no Breaker writes, so that a wrong token, account or
// namespace fails here: that error names the namespace and what to check
// (where each came from: WithSetting), and wraps the read's
// *driver.OpError (Op "get"), which unwraps to the API's. When ctx ends
// before the API answers, the error is a *driver.UnreachableError naming
// the base URL.
func Dial(ctx context.Context, accountID, namespaceID, token, baseURL string, opts ...Option) (*Store, error) {
	if token == "" {
		return nil, &driver.OptionError{Backend: "cloudflarekv", Option: "token", Value: `""`, Fix: "pass an API token with Workers KV Storage: Edit permission"}
	}
	ro := []option.RequestOption{option.WithAPIToken(token)}
	shown := defaultBaseURL
	if baseURL != "" {
		if err := adapter.CheckDialURL(ctx, "cloudflarekv", baseURL, 2*time.Second); err != nil {
			return nil, err
		}
		shown = adapter.ShownURL(baseURL)
		if !strings.HasSuffix(baseURL, "/") {
			baseURL += "/"
		}
		ro = append(ro, option.WithBaseURL(baseURL))
	}
	s, err := New(kv.NewKVService(ro...), accountID, namespaceID, opts...)
	if err != nil {
		return nil, err
	}
	if baseURL != "" {
		s.base = shown
	}
	if _, _, err := s.Get(ctx, "kvbreaker-connection-check.invalid"); err != nil && !errors.Is(err, driver.ErrNotFound) {
		_ = s.Close() // ends the read this Get left running
		if ctx.Err() != nil {
			return nil, &driver.UnreachableError{Backend: "cloudflarekv", Endpoints: []string{shown}, Reason: "no answer before the context ended", Err: err}
		}
		return nil, fmt.Errorf("checking access to %s (are %s, with Workers KV Storage: Edit permission, %s and %s right?): %w",
			s, named("the API token", s.setting[0]), named("the account ID", s.setting[1]), named("the namespace ID", s.setting[2]), err)
	}
	return s, nil
}

// named is what, followed by where it came from (WithSetting) if known.
func named(what, from string) string {
	if from == "" {
		return what
	}
	return what + " (" + from + ")"
}

// String names the namespace and its account, and the API base URL Dial
// was given (without credentials), for a tool's output or a log:
// "cloudflarekv namespace NAMESPACE of account ACCOUNT" or "… at
// http://127.0.0.1:8787/client/v4/". It shows no token.
func (s *Store) String() string {
	if s.base == "" {
		return "cloudflarekv namespace " + s.namespace + " of account " + s.account
	}
	return "cloudflarekv namespace " + s.namespace + " of account " + s.account + " at " + s.base
}
