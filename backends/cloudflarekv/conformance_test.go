package cloudflarekv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// kvHarness makes conformance stores over the shared Miniflare, each under its
// own prefix, on Miniflare's clock, which Advance moves (TimeAdvancer). A
// skewed reader is a store on the same prefix whose clock is offset from
// Miniflare's (SkewedStoreMaker); Lifetime is the key's expiration as
// Miniflare lists it (LifetimeReporter). Stores talk to Miniflare through a
// fault proxy (AnswerDropper).
type kvHarness struct {
	t     testing.TB
	proxy *faultproxy.Proxy
	kv    *kv.KVService

	mu       sync.Mutex
	prefixes map[driver.Store]string
}

func newKVHarness(_ context.Context, t *testing.T) (conformance.Harness, error) {
	p, err := faultproxy.Start(srv.URL[len("http://"):])
	if err != nil {
		return nil, err
	}
	opts := []option.RequestOption{option.WithAPIToken(srv.Token), option.WithBaseURL("http://" + p.Addr() + "/client/v4/")}
	return &kvHarness{t: t, proxy: p, kv: kv.NewKVService(opts...), prefixes: map[driver.Store]string{}}, nil
}

func (h *kvHarness) store(prefix string, clock func() time.Time) (driver.Store, error) {
	st, err := New(h.kv, srv.AccountID, srv.NamespaceID, WithClock(clock))
	if err != nil {
		return nil, err
	}
	s, err := kvbreaker.Prefixed(st, prefix)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.prefixes[s] = prefix
	h.mu.Unlock()
	return s, nil
}

func (h *kvHarness) MakeStore(context.Context) (driver.Store, error) {
	return h.store(uniquePrefix("conformance"), srv.Now)
}

func (h *kvHarness) Close() {
	// The lost-answer case proves nothing if the proxy lost no answer.
	h.t.Logf("fault proxy: %+v", h.proxy.Stats())
	_ = h.proxy.Close()
}

func (h *kvHarness) Describe() string {
	return fmt.Sprintf("Miniflare Workers KV at %s (through a fault proxy at %s)", srv.URL, h.proxy.Addr())
}

func (h *kvHarness) Advance(ctx context.Context, d time.Duration) error { return srv.Advance(ctx, d) }

func (h *kvHarness) MakeSkewedStore(_ context.Context, s driver.Store, offset time.Duration) (driver.Store, error) {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("not a store of this harness: %T", s)
	}
	return h.store(prefix, func() time.Time { return srv.Now().Add(offset) })
}

func (h *kvHarness) DropNextAnswer(ctx context.Context) error {
	return h.proxy.DropNextAnswer(ctx)
}

// Lifetime is the key's expiration (epoch seconds) as Miniflare lists it,
// minus Miniflare's now. The store's pending writes are flushed first.
func (h *kvHarness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("not a store of this harness: %T", s)
	}
	if err := s.(driver.Flusher).Flush(ctx); err != nil {
		return 0, err
	}
	keys, err := srv.List(ctx, prefix+key)
	if err != nil {
		return 0, err
	}
	for _, k := range keys {
		if k.Name == prefix+key {
			if k.Expiration == 0 {
				return 0, fmt.Errorf("%q has no expiration: Workers KV never deletes it", key)
			}
			return time.Unix(k.Expiration, 0).Sub(srv.Now()), nil
		}
	}
	return 0, driver.ErrNotFound
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newKVHarness)
}

// TestDefaultTraitsMatchSkewProfile: a Store with default options declares
// DefaultTraits, and skew's WorkersKV profile, on which the margin
// experiments run, equals them: a hand copy of the profile would drift
// (lose MaxClockSkew, say) with nothing comparing the two.
func TestDefaultTraitsMatchSkewProfile(t *testing.T) {
	s, err := New(client(), srv.AccountID, srv.NamespaceID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Traits(), DefaultTraits(); got != want {
		t.Errorf("Traits() with default options = %+v, but DefaultTraits() = %+v: update DefaultTraits", got, want)
	}
	if got, want := DefaultTraits(), skew.WorkersKV.Traits; got != want {
		t.Errorf("DefaultTraits() = %+v, but skew.WorkersKV declares %+v: update the profile", got, want)
	}
}

// foreignPuts are raw REST PUTs of values no Breaker wrote, none with an
// expiration: the value, and the metadata ("" for none).
var foreignPuts = map[string]func(now time.Time) (value, metadata string){
	"garbage, no expiration": func(time.Time) (string, string) { return "\xff\xfe not a record", "" },
	"empty":                  func(time.Time) (string, string) { return "", "" },
	"unknown format":         func(time.Time) (string, string) { return "\x09\x01\x02", "" },
	"bad envelope": func(time.Time) (string, string) {
		return `{"exp":"soon","ver":"x","val":"%%%"}`, ""
	},
	"bad metadata": func(now time.Time) (string, string) {
		return "\x01\x00\x00", `{"exp":"never","ver":-1}`
	},
	"live envelope, expired metadata": func(now time.Time) (string, string) {
		exp := now.Add(time.Hour).UnixMilli()
		return fmt.Sprintf(`{"exp":%d,"ver":77,"val":"AQAA"}`, exp),
			fmt.Sprintf(`{"exp":%d,"ver":77}`, now.Add(-time.Hour).UnixMilli())
	},
	"live envelope, no expiration": func(now time.Time) (string, string) {
		exp := now.Add(time.Hour).UnixMilli()
		return fmt.Sprintf(`{"exp":%d,"ver":78,"val":"AQAA"}`, exp), fmt.Sprintf(`{"exp":%d,"ver":78}`, exp)
	},
}

// ForeignShapes implements conformance.ForeignPlanter.
func (h *kvHarness) ForeignShapes() []string { return slices.Sorted(maps.Keys(foreignPuts)) }

// PlantForeign implements conformance.ForeignPlanter with a raw REST PUT
// to Miniflare, without expiration.
func (h *kvHarness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	h.mu.Lock()
	prefix, ok := h.prefixes[s]
	h.mu.Unlock()
	if !ok {
		return fmt.Errorf("not a store of this harness: %T", s)
	}
	return plantForeign(ctx, prefix+key, shape)
}

// plantForeign PUTs shape at the namespace's key full, without expiration.
func plantForeign(ctx context.Context, full, shape string) error {
	mk, ok := foreignPuts[shape]
	if !ok {
		return fmt.Errorf("no foreign shape %q", shape)
	}
	value, meta := mk(srv.Now())
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	if err := w.WriteField("value", value); err != nil {
		return err
	}
	if meta != "" {
		if err := w.WriteField("metadata", meta); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.BaseURL()+"accounts/"+srv.AccountID+"/storage/kv/namespaces/"+srv.NamespaceID+"/values/"+url.PathEscape(full), &body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	req.Header.Set("Content-Type", w.FormDataContentType())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("raw PUT %q: %s: %s", full, res.Status, b)
	}
	return nil
}
