package mysql

import "testing"

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
		end, ok := prefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("prefixEnd(%+q) = %+q, %v; want %+q, %v", c.prefix, end, ok, c.end, c.ok)
		}
	}
}
