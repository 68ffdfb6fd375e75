package nats

import (
	"strings"
)

// A key becomes a NATS subject token by token: the key's "/"-separated
// segments are the subject's "."-separated tokens, so that the prefixes
// kvbreaker.Prefixed makes ("fleet/") are subject prefixes a consumer can
// filter on ("fleet.>"). In a segment the bytes A-Z, a-z, 0-9, '-' and '_'
// stand for themselves and every other byte is '=' and two upper-case hex
// digits; an empty segment is "=" alone. Every token is then non-empty and
// of the characters NATS KV allows in a key, and the mapping is reversible.

// encodeKey returns key's subject tokens.
func encodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i, seg := range strings.Split(key, "/") {
		if i > 0 {
			b.WriteByte('.')
		}
		encodeSegment(&b, seg)
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func encodeSegment(b *strings.Builder, seg string) {
	if seg == "" {
		b.WriteByte('=')
		return
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// decodeKey reverses encodeKey; ok is false for a subject it cannot have
// made (another program's key in the bucket).
func decodeKey(tokens string) (key string, ok bool) {
	var b strings.Builder
	b.Grow(len(tokens))
	for i, tok := range strings.Split(tokens, ".") {
		if i > 0 {
			b.WriteByte('/')
		}
		if tok == "=" {
			continue
		}
		if tok == "" {
			return "", false
		}
		for j := 0; j < len(tok); j++ {
			c := tok[j]
			if plain(c) {
				b.WriteByte(c)
				continue
			}
			if c != '=' || j+2 >= len(tok) {
				return "", false
			}
			hi, lo := unhex(tok[j+1]), unhex(tok[j+2])
			if hi < 0 || lo < 0 {
				return "", false
			}
			v := byte(hi<<4 | lo)
			if plain(v) || v == '/' {
				return "", false // encodeKey never escapes these
			}
			b.WriteByte(v)
			j += 2
		}
	}
	return b.String(), true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// filterFor returns the subject filter, relative to the bucket, that
// covers every key beginning with prefix: the tokens of prefix's complete
// segments and ">" (">" alone for a prefix without '/'). Keys matching it
// may still not begin with prefix (the prefix's last, partial segment):
// the caller checks each.
func filterFor(prefix string) string {
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return ">"
	}
	return encodeKey(prefix[:i]) + ".>"
}
