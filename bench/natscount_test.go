package bench

import (
	"bytes"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// natsDialer counts the messages a NATS connection publishes by reading
// the client protocol it writes (nats.go has no hook on its requests):
// every request is one PUB or HPUB line with its payload, answered by one
// message on the connection's reply inbox. A publish to
// $JS.API.STREAM.MSG.GET.<stream> (the store's read of a key from the
// stream's leader) is a read, one to $KV.<bucket>.… (a compare-and-swap or
// compare-and-delete) a write, anything else (stream info, consumer
// requests) other. CONNECT, SUB, UNSUB, PING and PONG carry no message and
// are not counted. The rig checks the total against the connection's own
// statistics (nats.Conn.Stats().OutMsgs), so a miscounted publish fails
// the round-trip test.
type natsDialer struct{ t *tally }

func (d natsDialer) Dial(network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 5 * time.Second}).Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &natsWire{Conn: c, t: d.t}, nil
}

// natsWire is a connection whose writes go through a parser of the client
// protocol: a line ending in CRLF, and after a PUB or HPUB line a payload
// of the size the line names plus CRLF. nats.go writes from one buffered
// writer, so the parser sees the protocol in order, split anywhere.
type natsWire struct {
	net.Conn
	t    *tally
	mu   sync.Mutex
	line []byte // the protocol line read so far
	skip int    // payload bytes (and its CRLF) still to pass over
}

func (w *natsWire) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.parse(p)
	w.mu.Unlock()
	return w.Conn.Write(p)
}

func (w *natsWire) parse(p []byte) {
	for len(p) > 0 {
		if w.skip > 0 {
			n := min(w.skip, len(p))
			w.skip, p = w.skip-n, p[n:]
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			return
		}
		w.line = append(w.line, p[:i+1]...)
		p = p[i+1:]
		w.protocolLine(strings.TrimRight(string(w.line), "\r\n"))
		w.line = w.line[:0]
	}
}

// protocolLine counts a PUB or HPUB and sets the payload to skip:
// "PUB <subject> [reply] <size>", "HPUB <subject> [reply] <header size>
// <total size>".
func (w *natsWire) protocolLine(l string) {
	f := strings.Fields(l)
	if len(f) < 3 {
		return
	}
	switch strings.ToUpper(f[0]) {
	case "PUB", "HPUB":
	default:
		return
	}
	size, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		w.t.other.Add(1)
		return
	}
	w.skip = size + 2
	switch subj := f[1]; {
	case strings.HasPrefix(subj, "$JS.API.STREAM.MSG.GET."):
		w.t.reads.Add(1)
	case strings.HasPrefix(subj, "$KV."):
		w.t.writes.Add(1)
	default:
		w.t.other.Add(1)
	}
}
