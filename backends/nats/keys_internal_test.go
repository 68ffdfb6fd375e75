package nats

import (
	"regexp"
	"strings"
	"testing"
)

// validKey is nats.go's rule for a KV key (jetstream keyValid).
var validKey = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

// TestKeyEncoding: every key maps to a valid KV key that decodes back to
// it; segments map to tokens, so a prefix ending in "/" is a subject
// filter; distinct keys never collide.
func TestKeyEncoding(t *testing.T) {
	keys := []string{
		"a", "inbox.example", "fleet/inbox.example", "/", "//", "a/", "/a", "a//b",
		"=", "=3D", "_", "-", "%2F", "ünïcødé.example", "日本.jp", "a b\tc", "*", ">", "a.>",
		strings.Repeat("é", 128),
	}
	seen := map[string]string{}
	for _, k := range keys {
		enc := encodeKey(k)
		if !validKey.MatchString(enc) || strings.HasPrefix(enc, ".") || strings.HasSuffix(enc, ".") || strings.Contains(enc, "..") {
			t.Errorf("encodeKey(%q) = %q: not a valid KV key", k, enc)
		}
		if got, ok := decodeKey(enc); !ok || got != k {
			t.Errorf("decodeKey(encodeKey(%q) = %q) = %q, %v", k, enc, got, ok)
		}
		if other, dup := seen[enc]; dup {
			t.Errorf("%q and %q both encode to %q", k, other, enc)
		}
		seen[enc] = k
	}
	if got := encodeKey("fleet/inbox.example"); got != "fleet.inbox=2Eexample" {
		t.Errorf("encodeKey = %q", got)
	}
	for prefix, want := range map[string]string{"": ">", "fleet": ">", "fleet/": "fleet.>", "fleet/in": "fleet.>", "a/b/": "a.b.>", "/": "=.>"} {
		if got := filterFor(prefix); got != want {
			t.Errorf("filterFor(%q) = %q, want %q", prefix, got, want)
		}
	}
	for _, bad := range []string{"a..b", "=2", "=zz", "a=41", "a.=2F", "a*"} {
		if k, ok := decodeKey(bad); ok {
			t.Errorf("decodeKey(%q) = %q, want a refusal (encodeKey never makes it)", bad, k)
		}
	}
}

func FuzzKeyEncoding(f *testing.F) {
	f.Add("fleet/inbox.example")
	f.Fuzz(func(t *testing.T, k string) {
		enc := encodeKey(k)
		if got, ok := decodeKey(enc); !ok || got != k {
			t.Fatalf("decodeKey(encodeKey(%q) = %q) = %q, %v", k, enc, got, ok)
		}
	})
}
