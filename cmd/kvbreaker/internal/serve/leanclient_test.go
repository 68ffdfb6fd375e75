package serve

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"
)

// leanClient asks serve as a worker's synchronous HTTP/1.1 client does
// (Python's http.client on a kept-alive connection, for one): the request
// written in one system call and the answer read on the caller's
// goroutine, with no goroutines of its own. net/http's client hands each
// request to a connection's write loop and its answer back from a read
// loop; the open loop's targets lean and leanproc measure serve without
// those hand-offs, in this process and in a child.
type leanClient struct {
	addr string
	reqs [][]byte
	idle chan *leanConn
}

type leanConn struct {
	c net.Conn
	r *bufio.Reader
}

func newLeanClient(b testing.TB, lb *loopback, conns int) *leanClient {
	u, err := url.Parse(lb.url)
	if err != nil {
		b.Fatal(err)
	}
	lc := &leanClient{addr: u.Host, idle: make(chan *leanConn, conns)}
	for _, body := range lb.bodies {
		lc.reqs = append(lc.reqs, fmt.Appendf(nil, "POST /v1/decide HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", u.Host, tokWorker, len(body), body))
	}
	b.Cleanup(func() {
		for {
			select {
			case cn := <-lc.idle:
				cn.c.Close()
			default:
				return
			}
		}
	})
	return lc
}

// decide asks about the i-th of benchHosts on an idle connection, or a
// new one when none is idle (the warm-up's calls, all at once, open one
// per client).
func (lc *leanClient) decide(i int) error {
	var cn *leanConn
	select {
	case cn = <-lc.idle:
	default:
		c, err := net.Dial("tcp", lc.addr)
		if err != nil {
			return err
		}
		cn = &leanConn{c: c, r: bufio.NewReaderSize(c, 4096)}
	}
	if err := cn.exchange(lc.reqs[i%len(lc.reqs)]); err != nil {
		cn.c.Close()
		return err
	}
	select {
	case lc.idle <- cn:
	default:
		cn.c.Close()
	}
	return nil
}

// exchange writes req and reads one answer, which must be a 200 with a
// Content-Length (serve's decisions are written whole).
func (cn *leanConn) exchange(req []byte) error {
	if _, err := cn.c.Write(req); err != nil {
		return err
	}
	line, err := cn.r.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("POST /v1/decide: %q, want HTTP/1.1 200", bytes.TrimSpace(line))
	}
	length := -1
	for {
		line, err = cn.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(name, []byte("Content-Length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(value))); err != nil {
				return fmt.Errorf("POST /v1/decide: Content-Length %q", bytes.TrimSpace(value))
			}
		}
	}
	if length < 0 {
		return fmt.Errorf("POST /v1/decide: an answer without a Content-Length")
	}
	_, err = cn.r.Discard(length)
	return err
}

// TestLeanClientDecides: the lean client's exchanges are answered by
// serve with its decisions, connection after connection kept alive, and
// a request serve refuses (a token it does not know) is an error.
func TestLeanClientDecides(t *testing.T) {
	lb := startLoopback(t, 4)
	lc := newLeanClient(t, lb, 4)
	for i := range 50 {
		if err := lc.decide(i); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
	}
	if n := lb.accepted.Load(); n != 1 {
		t.Errorf("serve accepted %d connections for 50 decisions one after another, want 1 (kept alive)", n)
	}
	if st := lb.stats(t, false); st.Requests != 50 {
		t.Errorf("serve's handler served %d requests, want 50", st.Requests)
	}
	bad := newLeanClient(t, lb, 1)
	for i := range bad.reqs {
		bad.reqs[i] = bytes.Replace(bad.reqs[i], []byte(tokWorker), []byte("not-a-token-serve-knows"), 1)
	}
	if err := bad.decide(0); err == nil {
		t.Error("a request with a token serve does not know: no error")
	}
}
