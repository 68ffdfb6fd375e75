package serve

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// The decision route is the one every delivery of a fleet takes, so its
// body is read and written without reflection when it has the common
// shape: a body the fast reader does not recognise goes to encoding/json,
// whose answer (and error message) is then the route's, so the two can
// only differ in speed.

// bufPool holds request and response buffers. A buffer grown past
// maxPooled is dropped, so that one large batch does not pin memory.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooled = 64 << 10

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= maxPooled {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// delivery is a Delivery as the decision route uses it.
type delivery struct {
	host    string
	held    time.Time
	hasHeld bool
}

// parseDecide reads {"deliveries":[{"host":"…","held_since":"…"|null},…]}
// with any JSON whitespace, into ds. It returns false for anything else
// (another key, a key in another case, an escape in a string, null for
// the list), which encoding/json then decides.
func parseDecide(b []byte, ds []delivery) ([]delivery, bool) {
	p := fastParser{b: b}
	if !p.lit('{') {
		return ds, false
	}
	if k, ok := p.str(); !ok || string(k) != "deliveries" || !p.lit(':') || !p.lit('[') {
		return ds, false
	}
	if p.peek(']') {
		p.i++
	} else {
		for {
			var d delivery
			if !p.lit('{') {
				return ds, false
			}
			for first := true; ; first = false {
				if first && p.peek('}') {
					break
				}
				k, ok := p.str()
				if !ok || !p.lit(':') {
					return ds, false
				}
				switch string(k) {
				case "host":
					v, ok := p.str()
					if !ok {
						return ds, false
					}
					d.host = string(v) // a copy: the body's buffer is reused
				case "held_since":
					if p.null() {
						d.held, d.hasHeld = time.Time{}, false
						break
					}
					start := p.i
					if _, ok := p.str(); !ok {
						return ds, false
					}
					// time.Time's own JSON reading: the same checks.
					if err := d.held.UnmarshalJSON(b[start:p.i]); err != nil {
						return ds, false
					}
					d.hasHeld = true
				default:
					return ds, false
				}
				if !p.peek(',') {
					break
				}
				p.i++
			}
			if !p.lit('}') {
				return ds, false
			}
			ds = append(ds, d)
			if !p.peek(',') {
				break
			}
			p.i++
		}
		if !p.lit(']') {
			return ds, false
		}
	}
	if !p.lit('}') {
		return ds, false
	}
	p.space()
	return ds, p.i == len(b)
}

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek skips whitespace and reports whether c is next.
func (p *fastParser) peek(c byte) bool {
	p.space()
	return p.i < len(p.b) && p.b[p.i] == c
}

// lit skips whitespace and c.
func (p *fastParser) lit(c byte) bool {
	if !p.peek(c) {
		return false
	}
	p.i++
	return true
}

var null = []byte("null")

func (p *fastParser) null() bool {
	p.space()
	if bytes.HasPrefix(p.b[p.i:], null) {
		p.i += 4
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes; its bytes alias
// the body.
func (p *fastParser) str() ([]byte, bool) {
	if !p.lit('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, false
		}
	}
	return nil, false
}

// hostKeyFast is kvbreaker.HostKey for the names it returns unchanged:
// lower-case ASCII labels of letters, digits, '-' and '_' (1 to 63
// bytes, none starting or ending with '-', none an IDNA "xn--" or other
// "??--" label), at least one letter (so no IP address), no port, no
// trailing dot. Anything else goes to HostKey.
func hostKeyFast(h string) (string, bool) {
	if len(h) == 0 || len(h) > 253 {
		return "", false
	}
	letter := false
	label := 0
	for i := 0; i <= len(h); i++ {
		if i == len(h) || h[i] == '.' {
			if label == 0 || label > 63 || h[i-label] == '-' || h[i-1] == '-' ||
				(label >= 4 && h[i-label+2] == '-' && h[i-label+3] == '-') {
				return "", false
			}
			label = 0
			continue
		}
		switch c := h[i]; {
		case 'a' <= c && c <= 'z' || c == '_':
			letter = true
		case '0' <= c && c <= '9' || c == '-':
		default:
			return "", false
		}
		label++
	}
	return h, letter
}

var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// appendVerdicts appends DecideResponse{vs} as encoding/json writes it
// (TestFastMatchesEncodingJSON holds it to that).
func appendVerdicts(b []byte, vs []Verdict) []byte {
	b = append(b, `{"verdicts":[`...)
	for i := range vs {
		v := &vs[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"host":`...)
		b = appendString(b, v.Host)
		b = append(b, `,"decision":`...)
		b = appendString(b, v.Decision)
		b = append(b, `,"retry_at":`...)
		b = appendTime(b, v.RetryAt)
		b = append(b, `,"retry_in_ms":`...)
		if v.RetryInMS == nil {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendInt(b, *v.RetryInMS, 10)
		}
		b = append(b, `,"held_since":`...)
		b = appendTime(b, v.HeldSince)
		b = append(b, `,"probe_id":`...)
		b = appendOptString(b, v.ProbeID)
		b = append(b, `,"error":`...)
		b = appendOptString(b, v.Error)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

func appendTime(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	if y := t.Year(); y < 0 || y > 9999 {
		// encoding/json refuses it; so does MarshalJSON here, which
		// then writes the error's text, never a malformed value.
		j, err := t.MarshalJSON()
		if err != nil {
			return appendString(b, err.Error())
		}
		return append(b, j...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendString appends s as a JSON string. Printable ASCII that
// encoding/json leaves as it is is copied; anything else is encoded by
// encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
