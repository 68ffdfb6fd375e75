package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestDialErrorsHideSecrets: whatever is wrong with a URL, and wherever it
// carries a secret (userinfo, a password= query value, a keyword/value
// string, a fragment), Dial's error never contains the secret, nor a part
// of it that a parser quotes.
func TestDialErrorsHideSecrets(t *testing.T) {
	dead := backendtest.ClosedPort(t) // refuses: the Dial's reach error too
	const sec = "s3cr3tPW"
	for _, tc := range []struct{ name, url string }{
		{"userinfo, bad escape", "redis://:" + sec + "%zz@" + dead + "/0"},
		{"userinfo with user, bad escape", "redis://user:" + sec + "%zz@" + dead + "/0"},
		{"userinfo, bad port", "redis://:" + sec + "@127.0.0.1:notaport/0"},
		{"userinfo with a slash", "redis://:" + sec + "/x@" + dead + "/0"},
		{"userinfo with a question mark", "redis://:" + sec + "?x@" + dead + "/0"},
		{"userinfo as the port", "redis://user:" + sec + "/0"},
		{"userinfo, space in host", "redis://:" + sec + "@ho st:6379/0"},
		{"userinfo, control character", "redis://:" + sec + "@" + dead + "/0\x7f"},
		{"userinfo, bad db", "redis://:" + sec + "@" + dead + "/notadb"},
		{"userinfo, bad path", "redis://:" + sec + "@" + dead + "/0/1"},
		{"userinfo, bad option value", "redis://:" + sec + "@" + dead + "/0?dial_timeout=forever"},
		{"userinfo, unknown option", "redis://:" + sec + "@" + dead + "/0?frobnicate=1"},
		{"userinfo, refused", "redis://:" + sec + "@" + dead + "/0"},
		{"userinfo, tls, refused", "rediss://default:" + sec + "@" + dead + "/0"},
		{"userinfo, bad scheme", "redis+tls://:" + sec + "@" + dead + "/0"},
		{"password= query", "redis://" + dead + "/0?password=" + sec},
		{"password= query, bad escape", "redis://" + dead + "/0?password=" + sec + "%zz"},
		{"password= query, after another", "redis://" + dead + "/0?dial_timeout=1s&password=" + sec},
		{"password= query, bad value elsewhere", "redis://" + dead + "/0?password=" + sec + "&dial_timeout=x"},
		{"escaped password key", "redis://" + dead + "/0?pass%77ord=" + sec},
		{"fragment", "redis://" + dead + "/0#" + sec},
		{"keyword/value", "host=127.0.0.1 port=6379 password=" + sec},
		{"keyword/value, quoted", "host=127.0.0.1 password='" + sec + "'"},
		{"bare address with userinfo", ":" + sec + "@" + dead},
		{"unix socket", "unix://:" + sec + "@/nonexistent/redis.sock?db=x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			st, err := redis.Dial(ctx, tc.url)
			if err == nil {
				st.Close()
				t.Fatalf("Dial(%q) succeeded", tc.url)
			}
			if msg := err.Error(); strings.Contains(msg, sec) || strings.Contains(msg, sec[:5]) {
				t.Fatalf("Dial's error shows the secret: %v", msg)
			}
			t.Logf("%v", err)
		})
	}
}
