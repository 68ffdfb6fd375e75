package postgres

import "testing"

// TestPrefixEnd: the end of a prefix's range at the edges of UTF-8: the
// largest code point, the surrogate gap, and a prefix that is not UTF-8.
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
		{"a\u007f", "a\u0080", true},
		{"a\u07ff", "a\u0800", true},
		{"a\uD7FF", "a\uE000", true},
		{"a\uFFFF", "a\U00010000", true},
		{"a\U0010FFFF", "b", true},
		{"ab\U0010FFFF\U0010FFFF", "ac", true},
		{"\U0010FFFF", "", false},
		{"\U0010FFFF\U0010FFFF", "", false},
		{"a\xff", "a\xff", true},
	} {
		end, ok := prefixEnd(c.prefix)
		if end != c.end || ok != c.ok {
			t.Errorf("prefixEnd(%+q) = %+q, %v; want %+q, %v", c.prefix, end, ok, c.end, c.ok)
		}
	}
}
