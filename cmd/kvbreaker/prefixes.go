package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// How the command finds a fleet's keys in the store as a whole (raw: not
// under --prefix). kvbreaker.Prefixed stores key under prefix as
// kvbreaker.PrefixedKey(prefix, key): the prefix ends in '/', and the key
// has its '/' and '%' escaped, so a stored name's prefix is everything up
// to its last '/' and a name without '/' is a key stored under no prefix.

// scanPage is how many names one List call of a search asks for.
const scanPage = 1000

// maxSearch bounds the names findElsewhere reads: a search of a large
// table (a scan reads, and may bill, every item) is not worth one
// inspect.
var maxSearch = 10_000

// splitName splits a name as the store holds it into its prefix (""
// when it has none) and the key a Breaker under that prefix passed; ok is
// false for a name no Breaker can have written through kvbreaker.Prefixed
// (a '%' that is no escape).
func splitName(name string) (prefix, key string, ok bool) {
	i := strings.LastIndex(name, "/") // every prefix ends in '/' (kvbreaker.Prefixed)
	if i < 0 {
		return "", name, true
	}
	prefix = name[:i+1]
	key, ok = unescapeKey(name[i+1:])
	return prefix, key, ok
}

// unescapeKey reverses the escaping of kvbreaker.PrefixedKey: "%25" is
// '%', "%2F" is '/'; ok is false for any other '%'.
func unescapeKey(escaped string) (string, bool) {
	if !strings.Contains(escaped, "%") {
		return escaped, true
	}
	var b strings.Builder
	for i := 0; i < len(escaped); i++ {
		switch {
		case escaped[i] != '%':
			b.WriteByte(escaped[i])
			continue
		case strings.HasPrefix(escaped[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(escaped[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", false
		}
		i += 2
	}
	key := b.String()
	// Exactly what PrefixedKey makes of key, nothing else ("%2f" is not).
	return key, kvbreaker.PrefixedKey("/", key) == "/"+escaped
}

// search is what a search of the whole store found.
type search struct {
	// Prefixes are the other prefixes under which the host has a live
	// record ("" for none), sorted.
	Prefixes []string
	// Searched counts the names read; Complete is false when the search
	// ended (--timeout, or maxSearch names) before the end of the store.
	Searched int
	Complete bool
}

// findElsewhere lists the whole store (raw) for key under a prefix other
// than prefix, within ctx, and reads each name it finds, so that only live
// records count. It returns errNoLister for a store that cannot list.
func findElsewhere(ctx context.Context, raw driver.Store, prefix, key string) (search, error) {
	l, ok := raw.(driver.Lister)
	if !ok {
		return search{}, errNoLister
	}
	var s search
	found := map[string]bool{}
	cursor := ""
	for {
		names, next, err := l.List(ctx, "", cursor, min(scanPage, maxSearch-s.Searched))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return s, err
		}
		s.Searched += len(names)
		for _, name := range names {
			p, k, ok := splitName(name)
			if !ok || k != key || p == prefix {
				continue
			}
			if _, _, err := raw.Get(ctx, name); err == nil {
				found[p] = true
			}
		}
		if next == "" {
			s.Complete = true
			break
		}
		if s.Searched >= maxSearch {
			break
		}
		cursor = next
	}
	s.Prefixes = slices.Sorted(maps.Keys(found))
	return s, nil
}

// hasRecords reports whether the store (already under --prefix) lists any
// key, reading page after page from cursor until one or the end, within
// ctx: a page may hold none and still not be the last (a store may leave
// tombstones out of a page; other fleets' keys under a longer
// prefix are left out too). known is false when ctx ended first.
func hasRecords(ctx context.Context, store driver.Store, cursor string) (has, known bool, err error) {
	for {
		keys, next, err := listPage(ctx, store, cursor, scanPage)
		switch {
		case err != nil && ctx.Err() != nil:
			return false, false, nil
		case err != nil:
			return false, false, err
		case len(keys) > 0:
			return true, true, nil
		case next == "":
			return false, true, nil
		}
		cursor = next
	}
}

// prefixFlag is how a message tells the operator to pass prefix.
func prefixFlag(prefix string) string {
	if prefix == "" {
		return "no --prefix"
	}
	return "--prefix " + shellWord(prefix)
}

// elsewhereNote says under which other prefixes a host has a record.
func elsewhereNote(host string, s search) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s has a record under ", host)
	for i, p := range s.Prefixes {
		if i > 0 {
			b.WriteString(", ")
		}
		if p == "" {
			b.WriteString("no prefix")
		} else {
			fmt.Fprintf(&b, "prefix %q", p)
		}
	}
	fmt.Fprintf(&b, ": run again with %s", prefixFlag(s.Prefixes[0]))
	return b.String()
}
