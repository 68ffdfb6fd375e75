package core

import (
	"strings"
	"testing"
)

// TestValidKeyAgrees: the hot path's ASCII shortcut answers exactly as
// ValidateKey does.
func TestValidKeyAgrees(t *testing.T) {
	keys := []string{"", "inbox.example", "a b", "tab\there", "del\x7f", "nul\x00", "é.example", "\ufffd",
		"bad\xff", "c1\u0085", strings.Repeat("a", MaxKeyLen), strings.Repeat("a", MaxKeyLen+1), "~!@#$%^&*()"}
	for _, k := range keys {
		if got, want := validKey(k) == nil, ValidateKey(k) == nil; got != want {
			t.Errorf("%q: validKey says valid=%v, ValidateKey valid=%v", k, got, want)
		}
	}
}
