package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// TestWrongPrefix: a host whose circuit is open under fleet-a/, inspected
// and listed by an operator who gives no --prefix or another one, against
// a real Redis. Before, inspect said only "closed (no record …)", and list
// without --prefix showed "fleet-a/dead-1.example" as a host.
func TestWrongPrefix(t *testing.T) {
	srv := redistest.MustStart(t)
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()
	st, err := redis.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, p := range []string{"fleet-a/", "fleet-a/eu/"} {
		ps, err := kvbreaker.Prefixed(st, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := kvbreaker.New(ps, kvbreaker.Settings{FailureThreshold: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Failure(ctx, "dead-1.example"); err != nil {
			t.Fatal(err)
		}
	}
	conn := []string{"--backend", "redis", "--redis-url", srv.URL()}

	for _, prefix := range []string{"", "fleet-b/", "fleet-a/eu/x/"} {
		args := append([]string{"inspect", "--format", "json", "--prefix", prefix}, append(conn, "dead-1.example")...)
		code, out, errOut := runT(t, args...)
		var got inspectJSONOut
		if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("inspect --prefix %q: exit %d\n%s%s", prefix, code, out, errOut)
		}
		if got.Found || !slices.Equal(got.ElsewhereUnder, []string{"fleet-a/", "fleet-a/eu/"}) || got.ElsewhereSearched == nil || !*got.ElsewhereSearched {
			t.Errorf("inspect --prefix %q: found %v, elsewhere %q (searched %v)", prefix, got.Found, got.ElsewhereUnder, got.ElsewhereSearched)
		}
		want := `note: dead-1.example has a record under prefix "fleet-a/", prefix "fleet-a/eu/": run again with --prefix fleet-a/`
		if !strings.Contains(errOut, want) {
			t.Errorf("inspect --prefix %q: stderr lacks %q:\n%s", prefix, want, errOut)
		}
	}
	code, out, errOut := runT(t, append([]string{"inspect", "--prefix", "fleet-a/"}, append(conn, "dead-1.example")...)...)
	if code != exitOK || !strings.Contains(out, "state:             open") || !strings.Contains(errOut, "") || strings.Contains(errOut, "note:") {
		t.Errorf("inspect under the right prefix: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runT(t, append([]string{"reset", "--yes", "--prefix", "fleet-b/"}, append(conn, "dead-1.example")...)...)
	if code != exitOK || !strings.Contains(out, "already closed (no record)") ||
		!strings.Contains(errOut, `note: nothing reset: dead-1.example has a record under prefix "fleet-a/", prefix "fleet-a/eu/": run again with --prefix fleet-a/`) {
		t.Errorf("reset under the wrong prefix: exit %d\n%s%s", code, out, errOut)
	}

	// A search bounded below the store's size says so.
	defer func(n int) { maxSearch = n }(maxSearch)
	maxSearch = 1
	code, out, errOut = runT(t, append([]string{"inspect", "--prefix", "fleet-b/"}, append(conn, "elsewhere-not.example")...)...)
	if code != exitOK || !strings.Contains(errOut, "note: searched the first 1 keys of redis at "+srv.Addr()+" db 0 for elsewhere-not.example under other prefixes, not all") {
		t.Errorf("a bounded search: exit %d\n%s%s", code, out, errOut)
	}

	// list without --prefix: no host is a key under a prefix.
	code, out, errOut = runT(t, append([]string{"list", "--format", "json"}, conn...)...)
	var l listOutput
	if code != exitOK || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	if len(l.Hosts) != 0 || fmt.Sprint(l.OtherPrefixes) != "[{fleet-a/ 1} {fleet-a/eu/ 1}]" {
		t.Errorf("list without --prefix: hosts %v, other prefixes %v", hostNames(l), l.OtherPrefixes)
	}
	if !strings.Contains(errOut, `under prefixes (not hosts, not listed): "fleet-a/" (1), "fleet-a/eu/" (1); list them with --prefix fleet-a/`) {
		t.Errorf("list without --prefix: stderr %s", errOut)
	}
	l = listJSON(t, append([]string{"--prefix", "fleet-a/"}, conn...)...)
	if got := strings.Join(hostNames(l), ","); got != "dead-1.example" || fmt.Sprint(l.OtherPrefixes) != "[{fleet-a/eu/ 1}]" {
		t.Errorf("list --prefix fleet-a/: hosts %q, other prefixes %v", got, l.OtherPrefixes)
	}
}

// TestEmptinessPastTombstones: a prefix whose first keys are tombstones
// (which Redis's List leaves out of its page) but which holds a live
// record: neither inspect nor list may say it holds no record. Before,
// both judged it on one page (inspect on one key).
func TestEmptinessPastTombstones(t *testing.T) {
	srv := redistest.MustStart(t)
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()
	ctx := t.Context()
	// 3000 tombstones (hashes without v, as a delete leaves them) and one
	// live record, under fleet-c/.
	_, err := cli.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range 3000 {
			k := fmt.Sprintf("fleet-c/gone-%04d.example", i)
			p.HSet(ctx, k, redis.FieldVersion, "1", redis.FieldWriter, "x")
			p.PExpire(ctx, k, 10*time.Minute)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := redis.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := kvbreaker.Prefixed(st, "fleet-c/")
	b, err := kvbreaker.New(ps, kvbreaker.Settings{FailureThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Failure(ctx, "live.example"); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--backend", "redis", "--redis-url", srv.URL(), "--prefix", "fleet-c/"}
	code, out, errOut := runT(t, append([]string{"inspect", "--format", "json"}, append(conn, "other.example")...)...)
	var got inspectJSONOut
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got.PrefixHasKeys == nil || !*got.PrefixHasKeys || strings.Contains(errOut, "holds no record") {
		t.Errorf("inspect: exit %d, prefix_has_records %v\n%s%s", code, got.PrefixHasKeys, out, errOut)
	}
	code, out, errOut = runT(t, append([]string{"list", "--limit", "1"}, conn...)...)
	if code != exitOK || strings.Contains(errOut, "holds no record") {
		t.Errorf("list --limit 1: exit %d\n%s%s", code, out, errOut)
	}
	// And a prefix with no key at all is empty.
	code, out, errOut = runT(t, "inspect", "--backend", "redis", "--redis-url", srv.URL(), "--prefix", "fleet-d/", "other.example")
	if code != exitOK || !strings.Contains(errOut, `holds no record at all under prefix "fleet-d/"`) {
		t.Errorf("inspect of an empty prefix: exit %d\n%s%s", code, out, errOut)
	}
}
