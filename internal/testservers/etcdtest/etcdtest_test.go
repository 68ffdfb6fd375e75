package etcdtest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
)

// call posts a request to etcd's JSON gateway (/v3/...), so this package's
// tests need no etcd client.
func call(ctx context.Context, srv *etcdtest.Server, path string, req, resp any) error {
	return callURL(ctx, srv.Endpoints()[0]+path, req, resp)
}

// callURL posts req as JSON to url and decodes the answer into resp.
func callURL(ctx context.Context, url string, req, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(resp)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestStopRestartKeepsData: a key and its lease written before a kill are
// there after the restart, on the same endpoint; calls fail while the server
// is down and while it is paused, and the server grants 1 s leases.
func TestStopRestartKeepsData(t *testing.T) {
	srv := etcdtest.MustStart(t)
	ctx := t.Context()
	var lease struct{ ID, TTL string }
	if err := call(ctx, srv, "/v3/lease/grant", map[string]any{"TTL": 1}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.TTL != "1" {
		t.Errorf("a 1 s lease was granted for %s s; the fixture's minimum should be 1 s", lease.TTL)
	}
	var ok struct{}
	if err := call(ctx, srv, "/v3/kv/put", map[string]any{"key": b64("k"), "value": b64("v")}, &ok); err != nil {
		t.Fatal(err)
	}
	get := func(d time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		var r struct{ Kvs []struct{ Value string } }
		if err := call(ctx, srv, "/v3/kv/range", map[string]any{"key": b64("k")}, &r); err != nil {
			return "", err
		}
		if len(r.Kvs) != 1 {
			return "", fmt.Errorf("%d values", len(r.Kvs))
		}
		v, err := base64.StdEncoding.DecodeString(r.Kvs[0].Value)
		return string(v), err
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := get(300 * time.Millisecond); err == nil {
		t.Error("Get succeeded with the server paused")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if srv.Running() {
		t.Error("Running after Kill")
	}
	if _, err := get(300 * time.Millisecond); err == nil {
		t.Error("Get succeeded with the server down")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := get(10 * time.Second); err != nil || v != "v" {
		t.Fatalf("after restart Get = %q, %v; want the value written before", v, err)
	}
}
