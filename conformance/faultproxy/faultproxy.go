// Package faultproxy is a loopback TCP proxy that injects the faults a
// store's client meets in production: an answer lost after the server
// applied the request, an error answer after the server applied it, slow
// answers, reset connections and a hung server. It forwards bytes, so it
// serves any protocol over cleartext TCP: gRPC (etcd), HTTP/1.1 and h2c
// (DynamoDB, Workers KV emulators), Redis, PostgreSQL. TLS is not looked
// into, so the HTTP/2 request detection below needs cleartext.
//
// It is public so that a third party's conformance run can put it between
// its adapter and its server (see conformance's ambiguous-outcome cases):
// *Proxy is a conformance.AnswerDropper, so a harness's DropNextAnswer is
// return h.proxy.DropNextAnswer(ctx). Every client of every store the
// harness makes must dial the proxy (Addr), not the server, or the suite
// arms a fault no request of the store's passes through; and the client
// keeps the retries it has in production, since what is tested is what the
// adapter makes of a retried write. It imports only the standard library.
//
// # Requests
//
// Faults are armed on requests. What a request is depends on the
// connection, which the proxy recognises from its first client bytes:
//
//   - HTTP/2 (the client preface "PRI * HTTP/2.0…", as gRPC sends it): each
//     HEADERS frame that opens a new client stream is one request, however
//     the frames are split or batched on the wire. PING, SETTINGS and
//     WINDOW_UPDATE frames are not requests.
//   - anything else (HTTP/1.1 keep-alive, Redis, a raw protocol): a burst
//     of client bytes that follows server bytes (or opens the connection)
//     starts one request. A request the client writes in pieces with server
//     bytes in between (HTTP "100 Continue") counts as several.
//
// # Losing an answer
//
// A request armed by DropNextAnswer, FailNextAnswer or DropAnswers is
// forwarded in full, and everything the client sends after it too, so the
// server receives and applies it. From the moment it is armed, every byte
// the server sends on that connection is swallowed. The proxy then waits
// for the server's answer to the armed request (HTTP/2: the first HEADERS
// frame the server sends on the request's stream, which a gRPC server sends
// once its handler has returned; otherwise: the first server bytes after
// the request) and fires at once: a drop resets the client connection (TCP
// RST), a fail writes the given bytes to the client and closes it (FIN).
// If no answer starts within the grace (SetGrace, DefaultGrace) it fires
// anyway. The upstream connection is closed too.
//
// So the client never sees any answer sent after the armed request on that
// connection: on a multiplexed HTTP/2 connection, requests in flight on
// other streams lose their answers as well (they may or may not have been
// applied), as they would when a real connection breaks. A server that
// stops its work when its client goes away can only do so after it has
// begun answering, so the armed request has been handled.
//
// # Other faults
//
// Delay holds each answer burst (server bytes after client bytes) for the
// given time before forwarding it. Blackhole makes the proxy accept
// connections and read requests but neither forward them nor answer, as a
// hung server; when it ends (Blackhole(false) or Heal) the connections that
// lost bytes to it are reset, since their streams are no longer in step.
// ResetAll resets every open connection now. Heal clears every fault.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultGrace is how long an armed request waits for the server's answer
// before the fault fires without it.
const DefaultGrace = 2 * time.Second

// Stats counts what a Proxy did since Start.
type Stats struct {
	// Connections accepted from clients.
	Connections int
	// Requests seen from clients (see the package doc for what counts).
	Requests int
	// Dropped: armed requests whose answer was swallowed and whose client
	// connection was reset.
	Dropped int
	// Failed: armed requests whose client got the FailNextAnswer bytes.
	Failed int
	// AnswerTimeouts: armed requests that fired because the server had
	// not begun to answer within the grace.
	AnswerTimeouts int
	// Delayed: answer bursts held by Delay.
	Delayed int
	// Resets: connections reset by ResetAll or at the end of a Blackhole.
	Resets int
	// Blackholed: requests or answers discarded by Blackhole (bursts).
	Blackholed int
	// BytesUp and BytesDown: bytes forwarded to the server and to clients.
	BytesUp, BytesDown int64
}

// Proxy is a running fault proxy. Its methods are safe for concurrent use.
type Proxy struct {
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	conns     map[*conn]struct{}
	dropNext  int
	failNext  [][]byte
	rate      float64
	rng       *rand.Rand
	blackhole bool
	grace     time.Duration
	st        Stats

	delay atomic.Int64 // time.Duration
}

// Start listens on 127.0.0.1 at a free port and forwards every connection to
// upstream ("host:port"), dialling it when the client connects.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: make(map[*conn]struct{}), grace: DefaultGrace}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream is the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Close stops listening, resets every connection and returns once every
// goroutine of the proxy has ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := p.snapshot()
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.reset()
	}
	p.wg.Wait()
	return err
}

// SetGrace sets how long an armed request waits for the server's answer
// before its fault fires anyway (default DefaultGrace); d <= 0 restores the
// default. Applies to requests armed afterwards.
func (p *Proxy) SetGrace(d time.Duration) {
	if d <= 0 {
		d = DefaultGrace
	}
	p.mu.Lock()
	p.grace = d
	p.mu.Unlock()
}

// ErrClosed is what DropNextAnswer returns once the proxy is closed: no
// request will come through it, so none can lose its answer.
var ErrClosed = errors.New("faultproxy: proxy closed")

// DropNextAnswer arms the next request (on any connection): it is
// forwarded and applied, its answer is swallowed and the client connection
// is reset. Calls add up: two calls arm the next two requests. It arms
// nothing and returns ctx's error when ctx has ended, and ErrClosed after
// Close. Its shape is conformance.AnswerDropper's, so a harness delegates
// to it: return h.proxy.DropNextAnswer(ctx).
func (p *Proxy) DropNextAnswer(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.dropNext++
	return nil
}

// FailNextAnswer is DropNextAnswer, except that instead of a reset the
// client receives raw (e.g. a whole HTTP 500 response) and then the
// connection closes. Armed after any pending DropNextAnswer.
func (p *Proxy) FailNextAnswer(raw []byte) {
	p.mu.Lock()
	p.failNext = append(p.failNext, bytes.Clone(raw))
	p.mu.Unlock()
}

// DropAnswers arms each later request with probability rate (0 turns it
// off), drawing from a generator seeded with seed, as DropNextAnswer does.
// Which requests are hit is reproducible for a given seed and order of
// requests.
func (p *Proxy) DropAnswers(rate float64, seed int64) {
	p.mu.Lock()
	p.rate = rate
	p.rng = rand.New(rand.NewSource(seed))
	p.mu.Unlock()
}

// Delay holds each answer burst for d before forwarding it; 0 turns it off.
func (p *Proxy) Delay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// Blackhole turns the hung-server fault on or off. On: connections are
// accepted and read, nothing is forwarded or answered. Off: connections
// that lost bytes meanwhile are reset.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	var taint []*conn
	if !on {
		for c := range p.conns {
			if c.tainted.Load() {
				taint = append(taint, c)
			}
		}
		p.st.Resets += len(taint)
	}
	p.mu.Unlock()
	for _, c := range taint {
		c.reset()
	}
}

// ResetAll resets every open connection now (TCP RST to the client).
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	conns := p.snapshot()
	p.st.Resets += len(conns)
	p.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// BreakFeed resets every open connection now, as ResetAll does: a
// follower's stream (etcd's Watch, a Redis or PostgreSQL subscription)
// breaks with the rest. It resets nothing and returns ctx's error when ctx
// has ended, and ErrClosed after Close. Its shape is
// conformance.FeedBreaker's, so a harness delegates to it: return
// h.proxy.BreakFeed(ctx).
func (p *Proxy) BreakFeed(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return ErrClosed
	}
	p.ResetAll()
	return nil
}

// Heal clears every fault: pending and random answer faults, delay and
// blackhole. Requests already armed still lose their answer.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.dropNext, p.failNext, p.rate = 0, nil, 0
	p.mu.Unlock()
	p.Delay(0)
	p.Blackhole(false)
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

func (p *Proxy) snapshot() []*conn {
	out := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (EMFILE): go on.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			cc.Close()
			return
		}
		hole := p.blackhole
		p.st.Connections++
		p.mu.Unlock()
		c := &conn{p: p, c: cc, done: make(chan struct{})}
		if !hole {
			uc, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
			if err != nil {
				// Like a server that refuses: the client sees a reset.
				resetConn(cc)
				continue
			}
			c.u = uc
		} else {
			c.tainted.Store(true)
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.reset()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		if c.u != nil {
			p.wg.Add(1)
			go c.down()
		}
		p.mu.Unlock()
		go c.up()
	}
}

// takeFaultLocked decides whether a request just seen is armed, consuming
// the fault; called with p.mu held.
func (p *Proxy) takeFaultLocked() (kind faultKind, raw []byte) {
	switch {
	case p.dropNext > 0:
		p.dropNext--
		return faultDrop, nil
	case len(p.failNext) > 0:
		raw = p.failNext[0]
		p.failNext = p.failNext[1:]
		return faultFail, raw
	case p.rate > 0 && p.rng.Float64() < p.rate:
		return faultDrop, nil
	}
	return faultNone, nil
}

type faultKind int8

const (
	faultNone faultKind = iota
	faultDrop
	faultFail
)

// proto is what the connection speaks, decided on its first client bytes.
type proto int8

const (
	protoUnknown proto = iota
	protoH2
	protoRaw
)

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// conn is one client connection and its upstream.
type conn struct {
	p    *Proxy
	c    net.Conn // client side
	u    net.Conn // upstream; nil when accepted during a blackhole
	done chan struct{}
	once sync.Once

	tainted atomic.Bool // lost bytes to a blackhole

	mu          sync.Mutex
	proto       proto
	cp, sp      h2parser // client→server, server→client frame parsers
	maxStream   uint32
	seenRequest bool // raw: the first request has been counted
	answered    bool // server bytes since the last client request (raw)
	inAnswer    bool // an answer burst is being forwarded (for Delay)
	armed       faultKind
	armedRaw    []byte
	armedID     uint32 // HTTP/2 stream of the armed request
	sawAnswer   bool   // server began answering the armed request
	fired       bool
}

// up copies client→server, spotting requests and arming faults.
func (c *conn) up() {
	defer c.p.wg.Done()
	defer c.reset()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.c.Read(buf)
		if n > 0 {
			if !c.fromClient(buf[:n]) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// fromClient handles one chunk of client bytes; false ends the connection.
func (c *conn) fromClient(b []byte) bool {
	p := c.p
	p.mu.Lock()
	hole := p.blackhole
	if hole || c.u == nil {
		p.st.Blackholed++
		p.mu.Unlock()
		c.tainted.Store(true)
		return true
	}
	c.mu.Lock()
	if c.proto == protoUnknown {
		c.proto = protoRaw
		m := min(len(b), len(h2Preface))
		if string(b[:m]) == h2Preface[:m] {
			c.proto = protoH2
			c.cp.skip = len(h2Preface)
		}
	}
	requests := 0
	var firstID uint32
	if c.proto == protoH2 {
		c.cp.feed(b, func(typ byte, id uint32) {
			if typ == frameHeaders && id > c.maxStream {
				c.maxStream = id
				if requests == 0 {
					firstID = id
				}
				requests++
			}
		})
	} else if c.answered || !c.seenRequest {
		requests = 1
	}
	c.seenRequest = c.seenRequest || requests > 0
	c.answered, c.inAnswer = false, false
	armedNow := false
	var grace time.Duration
	for range requests {
		p.st.Requests++
		if c.armed != faultNone {
			// The connection is lost already; keep the fault for another.
			continue
		}
		if kind, raw := p.takeFaultLocked(); kind != faultNone {
			c.armed, c.armedRaw, c.armedID, armedNow = kind, raw, firstID, true
			grace = p.grace
		}
	}
	c.mu.Unlock()
	p.st.BytesUp += int64(len(b))
	p.mu.Unlock()
	if armedNow {
		// Wake the reader below if the server never answers.
		c.u.SetReadDeadline(time.Now().Add(grace))
	}
	if _, err := c.u.Write(b); err != nil {
		return false
	}
	return true
}

// down copies server→client: swallowing after an armed request, delaying,
// discarding during a blackhole.
func (c *conn) down() {
	defer c.p.wg.Done()
	defer c.reset()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.u.Read(buf)
		if n > 0 {
			if !c.fromServer(buf[:n]) {
				return
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.fire(true)
			}
			return
		}
	}
}

func (c *conn) fromServer(b []byte) bool {
	p := c.p
	c.mu.Lock()
	if c.armed != faultNone {
		if c.proto == protoH2 {
			c.sp.feed(b, func(typ byte, id uint32) {
				if typ == frameHeaders && id == c.armedID {
					c.sawAnswer = true
				}
			})
		} else {
			c.sawAnswer = true
		}
		saw := c.sawAnswer
		c.mu.Unlock()
		if saw {
			c.fire(false)
			return false
		}
		return true
	}
	if c.proto == protoH2 {
		// Keep the server-side parser in step for a later arming.
		c.sp.feed(b, func(byte, uint32) {})
	}
	newBurst := !c.inAnswer
	c.answered, c.inAnswer = true, true
	c.mu.Unlock()
	if c.tainted.Load() || p.isBlackhole() {
		c.tainted.Store(true)
		p.mu.Lock()
		p.st.Blackholed++
		p.mu.Unlock()
		return true
	}
	if d := time.Duration(p.delay.Load()); d > 0 && newBurst {
		p.mu.Lock()
		p.st.Delayed++
		p.mu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	if _, err := c.c.Write(b); err != nil {
		return false
	}
	p.mu.Lock()
	p.st.BytesDown += int64(len(b))
	p.mu.Unlock()
	return true
}

func (p *Proxy) isBlackhole() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

// fire ends the connection as the armed fault says; timeout: the server did
// not answer within the grace.
func (c *conn) fire(timeout bool) {
	c.mu.Lock()
	if c.fired || c.armed == faultNone {
		c.mu.Unlock()
		return
	}
	c.fired = true
	kind, raw := c.armed, c.armedRaw
	c.mu.Unlock()
	c.p.mu.Lock()
	if timeout {
		c.p.st.AnswerTimeouts++
	}
	if kind == faultFail {
		c.p.st.Failed++
	} else {
		c.p.st.Dropped++
	}
	c.p.mu.Unlock()
	if kind == faultFail {
		c.c.SetWriteDeadline(time.Now().Add(time.Second))
		c.c.Write(raw)
		c.close()
		return
	}
	c.reset()
}

// reset ends both sides, with a TCP RST to the client.
func (c *conn) reset() {
	c.once.Do(func() {
		close(c.done)
		resetConn(c.c)
		if c.u != nil {
			c.u.Close()
		}
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

// close ends both sides with a normal close (FIN) to the client.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		c.c.Close()
		if c.u != nil {
			c.u.Close()
		}
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}

func resetConn(nc net.Conn) {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetLinger(0) // close sends RST instead of FIN
	}
	nc.Close()
}

// HTTP/2 frame types the proxy looks at.
const frameHeaders = 0x1

// h2parser follows the frame boundaries of one direction of an HTTP/2
// connection across arbitrary read boundaries.
type h2parser struct {
	skip int // bytes to pass before the next frame header
	hdr  [9]byte
	hn   int
}

// feed passes b through the parser, calling frame for each frame header.
func (h *h2parser) feed(b []byte, frame func(typ byte, stream uint32)) {
	for len(b) > 0 {
		if h.skip > 0 {
			n := min(h.skip, len(b))
			h.skip -= n
			b = b[n:]
			continue
		}
		n := copy(h.hdr[h.hn:], b)
		h.hn += n
		b = b[n:]
		if h.hn < len(h.hdr) {
			return
		}
		h.hn = 0
		length := int(h.hdr[0])<<16 | int(h.hdr[1])<<8 | int(h.hdr[2])
		id := (uint32(h.hdr[5])<<24 | uint32(h.hdr[6])<<16 | uint32(h.hdr[7])<<8 | uint32(h.hdr[8])) & 0x7fffffff
		frame(h.hdr[3], id)
		h.skip = length
	}
}
