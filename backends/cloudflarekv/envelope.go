package cloudflarekv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// envelope is the stored value: the record (base64, since the REST API's
// multipart "value" field is text), its version, and its logical expiry in
// Unix milliseconds. The expiry is also in the key's metadata (for listings
// and sweepers); Get reads the value's copy, so a read costs one request, not
// two.
type envelope struct {
	Exp   int64  `json:"exp"`
	Ver   uint64 `json:"ver"`
	Value string `json:"val"`
}

// metadata is what the key's metadata holds.
type metadata struct {
	Exp int64  `json:"exp"`
	Ver uint64 `json:"ver"`
}

func encodeEnvelope(w write) (value, meta string) {
	v, _ := json.Marshal(envelope{Exp: w.exp.UnixMilli(), Ver: uint64(w.ver), Value: base64.StdEncoding.EncodeToString(w.value)})
	m, _ := json.Marshal(metadata{Exp: w.exp.UnixMilli(), Ver: uint64(w.ver)})
	return string(v), string(m)
}

// decodeEnvelope parses a stored value. A value this package did not write
// is returned as it is, with version 1 and no logical expiry, so Breaker
// sees a corrupt record and overwrites it.
func decodeEnvelope(b []byte) (value []byte, ver driver.Version, exp time.Time) {
	var env envelope
	if json.Unmarshal(b, &env) == nil && env.Ver != 0 {
		if v, err := base64.StdEncoding.DecodeString(env.Value); err == nil {
			return v, driver.Version(env.Ver), time.UnixMilli(env.Exp)
		}
	}
	return b, 1, noLogicalExpiry
}

// noLogicalExpiry is the logical expiry of a value this package did not
// write: after every clock, so it lasts as long as KV keeps it.
var noLogicalExpiry = time.Unix(1<<40, 0)

// physicalTTL is the expiration_ttl, in whole seconds, for a logical ttl:
// at least Workers KV's minimum, and padded so that KV, counting from its
// own whole-second clock, never deletes before any reader's clock (within
// the skew bound) has passed the logical expiry.
func (s *Store) physicalTTL(ttl time.Duration) int64 {
	d := max(MinTTL, ttl+s.pad)
	return int64((d + time.Second - 1) / time.Second)
}

// escapeKey percent-encodes a key name for one URL path segment: every byte
// except ASCII letters, digits and "-_.~". '/', '%', '?', '#', spaces and
// non-ASCII bytes all become %XX, so the segment decodes back to exactly the
// key. (fullKey refuses the keys "." and "..", which a URL resolver would
// take for the directory and its parent.)
func escapeKey(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key) * 3)
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '~':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

func (w write) String() string {
	if w.del {
		return fmt.Sprintf("delete (write %d)", w.ver)
	}
	return fmt.Sprintf("put version %d, %d bytes, ttl %v", w.ver, len(w.value), w.ttl)
}
