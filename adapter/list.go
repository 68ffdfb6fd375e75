package adapter

// PrefixEnd returns the least string above every string that begins with
// prefix in bytewise order (a BINARY or BLOB column's collation, Go's
// string order): prefix with its last byte below 0xff incremented and what
// follows it dropped. There is none (false) when prefix is empty or all
// 0xff bytes; then every string at or above prefix begins with it. A store
// lists a prefix as the range [prefix, end) so that an index answers it.
func PrefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// NextCursor is driver.Lister.List's next cursor for a page of keys read
// in order with a limit of limit: the last key when the page is full (there
// may be more after it), else "" (the listing is done). A full last page
// costs one more, empty, call; a short page never ends a listing early.
func NextCursor(keys []string, limit int) string {
	if len(keys) == limit && limit > 0 {
		return keys[len(keys)-1]
	}
	return ""
}
