package adapter

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPrefixEnd: the end of a prefix's bytewise range, at the edges: a
// last byte of 0xff is dropped and the one before it incremented.
func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		prefix, end string
		ok          bool
	}{
		{"", "", false},
		{"a", "b", true},
		{"a/", "a0", true},
		{"a%", "a&", true},
		{`a\`, "a]", true},
		{"a\u007f", "a\u0080"[:1] + "\x80", true},
		{"a\U0010FFFF", "a\xf4\x8f\xbf\xc0", true},
		{"a\xff", "b", true},
		{"ab\xff\xff", "ac", true},
		{"\xff", "", false},
		{"\xff\xff", "", false},
	} {
		end, ok := PrefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("PrefixEnd(%+q) = %+q, %v; want %+q, %v", c.prefix, end, ok, c.end, c.ok)
		}
	}
}

// TestPrefixEndBoundsTheRange: over random strings of a small alphabet
// that holds 0x00 and 0xff, a string lies in [prefix, end) exactly when it
// begins with prefix (with no end: exactly when it is at or above prefix).
func TestPrefixEndBoundsTheRange(t *testing.T) {
	r := rand.New(rand.NewPCG(39, 2))
	word := func() string {
		b := make([]byte, r.IntN(5))
		for i := range b {
			b[i] = []byte{0x00, 'a', 'b', 0xfe, 0xff}[r.IntN(5)]
		}
		return string(b)
	}
	for range 20000 {
		prefix, s := word(), word()
		end, ok := PrefixEnd(prefix)
		in := s >= prefix && (!ok || s < end)
		if in != strings.HasPrefix(s, prefix) {
			t.Fatalf("PrefixEnd(%+q) = %+q, %v: %+q in the range is %v, has the prefix is %v", prefix, end, ok, s, in, !in)
		}
	}
}

// TestNextCursor: a full page goes on from its last key; a short one (or
// an empty one) ends the listing.
func TestNextCursor(t *testing.T) {
	for _, c := range []struct {
		keys  []string
		limit int
		want  string
	}{
		{nil, 3, ""},
		{[]string{"a"}, 3, ""},
		{[]string{"a", "b", "c"}, 3, "c"},
		{[]string{"a"}, 1, "a"},
		{nil, 0, ""},
	} {
		if got := NextCursor(c.keys, c.limit); got != c.want {
			t.Errorf("NextCursor(%q, %d) = %q, want %q", c.keys, c.limit, got, c.want)
		}
	}
}
