package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

func listJSON(t *testing.T, args ...string) listOutput {
	t.Helper()
	code, out, errOut := runT(t, append([]string{"list", "--format", "json"}, args...)...)
	if code != exitOK {
		t.Fatalf("list %v: exit %d\n%s\n%s", args, code, out, errOut)
	}
	var l listOutput
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("list output is not JSON: %v\n%s", err, out)
	}
	return l
}

// hostNames are the listed hosts, sorted (a store lists in its own order:
// DynamoDB's scan is in hash order).
func hostNames(l listOutput) []string {
	var out []string
	for _, h := range l.Hosts {
		out = append(out, h.Host)
	}
	slices.Sort(out)
	return out
}

// TestList opens two circuits and leaves a third host closed with one
// failure, through a Breaker over each backend under a fresh prefix, then
// lists them: all, by state, page by page, and as a table.
func TestList(t *testing.T) {
	for _, backend := range []string{"memory", "etcd", "dynamodb", "cloudflarekv"} {
		t.Run(backend, func(t *testing.T) {
			prefix := "list-" + randomHex(4) + "/"
			b, flush := openTest(t, backend, prefix)
			ctx := t.Context()
			for _, h := range []string{"a-open.example", "b-open.example"} {
				for range 5 {
					if err := b.Failure(ctx, h); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := b.Failure(ctx, "c-closed.example"); err != nil {
				t.Fatal(err)
			}
			flush()
			args := append(connArgs(backend), "--prefix", prefix)

			all := listJSON(t, args...)
			if got := strings.Join(hostNames(all), ","); got != "a-open.example,b-open.example,c-closed.example" || all.NextCursor != nil || all.Scanned != 3 {
				t.Fatalf("list: hosts %s, scanned %d, next %v", got, all.Scanned, all.NextCursor)
			}
			for _, h := range all.Hosts {
				open := strings.HasSuffix(h.Host, "-open.example")
				if open && (h.State != "open" || h.FailureCount != 5 || h.RestrainedUntil == nil || h.RestrainedForMS == nil || h.Probing) {
					t.Errorf("open host %+v", h)
				}
				if !open && (h.State != "closed" || h.FailureCount != 1 || h.RestrainedUntil != nil || h.RestrainedForMS != nil) {
					t.Errorf("closed host %+v", h)
				}
			}
			if got := hostNames(listJSON(t, append(args, "--state", "open")...)); strings.Join(got, ",") != "a-open.example,b-open.example" {
				t.Errorf("--state open: %v", got)
			}
			if got := hostNames(listJSON(t, append(args, "--state", "closed")...)); strings.Join(got, ",") != "c-closed.example" {
				t.Errorf("--state closed: %v", got)
			}
			if got := hostNames(listJSON(t, append(args, "--state", "half-open")...)); len(got) != 0 {
				t.Errorf("--state half-open: %v", got)
			}
			// Page by page: --limit 1 reads one key and gives the cursor.
			var paged []string
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 5 {
					t.Fatalf("more pages than keys: %v", paged)
				}
				a := append(args, "--limit", "1")
				if cursor != "" {
					a = append(a, "--cursor", cursor)
				}
				p := listJSON(t, a...)
				if p.Scanned > 1 {
					t.Fatalf("--limit 1 read %d keys", p.Scanned)
				}
				paged = append(paged, hostNames(p)...)
				if p.NextCursor == nil {
					break
				}
				cursor = *p.NextCursor
			}
			slices.Sort(paged)
			if strings.Join(paged, ",") != "a-open.example,b-open.example,c-closed.example" {
				t.Errorf("pages: %v", paged)
			}
			if got := hostNames(listJSON(t, append(args, "--limit", "1", "--all")...)); len(got) != 3 {
				t.Errorf("--all --limit 1: %v", got)
			}
			code, out, errOut := runT(t, append([]string{"list"}, args...)...)
			if code != exitOK || !strings.Contains(out, "HOST") || !strings.Contains(out, "a-open.example") ||
				!strings.Contains(out, "3 host(s), 3 key(s) read") || errOut != "" {
				t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
			}
		})
	}
}

// noLister hides memory's List: a store that cannot enumerate its keys.
type noLister struct{ driver.Store }

func init() {
	backends["memory-no-lister"] = variant(func(context.Context, *backendFlags) (*conn, error) {
		return &conn{describe: "memory without List (test)", store: noLister{memory.New()}}, nil
	}, "memory")
}

// TestListUnsupported: a store without driver.Lister says so, and inspect
// still works over it (without the prefix hint).
func TestListUnsupported(t *testing.T) {
	code, out, errOut := runT(t, "list", "--backend", "memory-no-lister")
	if code != exitFail || !strings.Contains(errOut, "cannot list its keys (it does not implement driver.Lister)") || out != "" {
		t.Errorf("exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runT(t, "inspect", "--backend", "memory-no-lister", "--prefix", "nothing-here/", "a.example")
	if code != exitOK || strings.Contains(errOut, "no record at all") {
		t.Errorf("inspect over a store without Lister: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestInspectPrefixHint: inspect on a prefix with no record at all says
// the prefix may be wrong; with a record of another host there, it does
// not.
func TestInspectPrefixHint(t *testing.T) {
	prefix := "hint-" + randomHex(4) + "/"
	args := []string{"inspect", "--backend", "memory", "--prefix", prefix, "--format", "json", "a.example"}
	code, out, errOut := runT(t, args...)
	if code != exitOK || !strings.Contains(errOut, "holds no record at all under prefix \""+prefix+"\": is --prefix the one") ||
		!strings.Contains(out, `"prefix_has_records": false`) {
		t.Fatalf("empty prefix: exit %d\n%s\n%s", code, out, errOut)
	}
	b, _ := openTest(t, "memory", prefix)
	if err := b.Failure(t.Context(), "other.example"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runT(t, args...)
	if code != exitOK || errOut != "" || !strings.Contains(out, `"prefix_has_records": true`) {
		t.Fatalf("prefix with a record: exit %d\n%s\n%s", code, out, errOut)
	}
}

// repeater lists the previous page's last key again at the top of each
// later page, as Redis's SCAN may while its table is rehashed.
type repeater struct {
	*memory.Store
	mu   sync.Mutex
	last string
}

func (r *repeater) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	keys, next, err := r.Store.List(ctx, prefix, cursor, limit)
	if err != nil || len(keys) == 0 {
		return keys, next, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cursor != "" && r.last != "" {
		keys = append([]string{r.last}, keys...)
	}
	r.last = keys[len(keys)-1]
	return keys, next, nil
}

// TestListRepeatedKeys: a store that lists a key twice (driver.Lister
// allows it) still shows each host once and counts it once.
func TestListRepeatedKeys(t *testing.T) {
	store := &repeater{Store: memory.New()}
	backends["memory-repeats"] = variant(func(context.Context, *backendFlags) (*conn, error) {
		return &conn{describe: "memory that repeats keys (test)", store: store}, nil
	}, "memory")
	t.Cleanup(func() { delete(backends, "memory-repeats") })
	b, err := kvbreaker.New(store, kvbreaker.Settings{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hosts := []string{"a.example", "b.example", "c.example", "d.example"}
	for _, h := range hosts {
		if err := b.Failure(t.Context(), h); err != nil {
			t.Fatal(err)
		}
	}
	l := listJSON(t, "--backend", "memory-repeats", "--limit", "1", "--all")
	if got := strings.Join(hostNames(l), ","); got != strings.Join(hosts, ",") || l.Scanned != len(hosts) {
		t.Errorf("list --all over a store that repeats keys: hosts %s, scanned %d; want each of %v once", got, l.Scanned, hosts)
	}
}
