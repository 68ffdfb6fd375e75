package kvbreaker

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/driver"
)

// The tests in this file kill mutants of hostkey.go (go run ./tools/mutants
// -pkg . -files hostkey.go) that the other tests let live.

// name returns a host name of n bytes in labels of at most 63.
func name(n int) string {
	var labels []string
	for n > 0 {
		l := min(n, 63)
		if n > 63 && n-l < 2 { // leave room for a dot and a label
			l = n - 2
		}
		labels = append(labels, strings.Repeat("a", l))
		n -= l + 1
	}
	return strings.Join(labels, ".")
}

// TestHostKeyEdges: HostKey accepts names up to 253 bytes in labels up to
// 63, one-letter names, and every letter and digit, and says what is
// wrong with a URL that has no host.
func TestHostKeyEdges(t *testing.T) {
	for _, in := range []string{
		name(253), strings.Repeat("b", 63) + ".example", "a", "z.example", "0.example", "az09-_.example",
		"abcdefghijklmnopqrstuvwxyz.example", "0123456789.example",
	} {
		if len(in) > 253 {
			t.Fatalf("bad case: %d bytes", len(in))
		}
		if got, err := HostKey(in); err != nil || got != in {
			t.Errorf("HostKey(%q) = %q, %v; want it unchanged", in, got, err)
		}
	}
	for _, in := range []string{name(254), name(300)} {
		if len(in) != 254 && len(in) != 300 {
			t.Fatalf("bad case: %d bytes", len(in))
		}
		if got, err := HostKey(in); !errors.Is(err, driver.ErrInvalidKey) || !strings.Contains(err.Error(), "253") {
			t.Errorf("HostKey(a name of %d bytes) = %q, %v; want driver.ErrInvalidKey saying the limit", len(in), got, err)
		}
	}
	if _, err := HostKey("https:///inbox"); !errors.Is(err, driver.ErrInvalidKey) || !strings.Contains(err.Error(), "no host") {
		t.Errorf("HostKey without a host = %v; want driver.ErrInvalidKey saying there is no host", err)
	}
}

// TestDialable: dialable refuses what Go's resolver refuses, at each end
// of a label and at the edges of each character range, whatever the IDNA
// mapping before it lets through.
func TestDialable(t *testing.T) {
	for h, ok := range map[string]bool{
		"a": true, "z": true, "0": true, "9": true, "a-b": true, "_a": true, "a_": true,
		"-a": false, "a-": false, "-": false, "a.-b": false, "a.b-": false,
		"`": false, "{": false, "/": false, ":": false, "A": false, "*a": false, "a*": false, "a.*b": false,
		"": false, ".": false, "a..b": false,
	} {
		if err := dialable(h); (err == nil) != ok {
			t.Errorf("dialable(%q) = %v; want ok %v", h, err, ok)
		}
	}
}
