// Package dateproxy starts a loopback HTTP reverse proxy that rewrites the
// Date header of a test server's answers, so that a client reading the
// server's clock from Date (a driver.ClockSampler over HTTP) can be tested
// against a clock off by a known amount, or against a Date that is missing
// or garbage. Standard library only, like the other test-server launchers.
//
//	p := dateproxy.Start(t, srv.Endpoint, dateproxy.Shift(7*time.Second))
//	client := newClient(p.URL)          // the store talks to the proxy
//	p.Set(dateproxy.Raw(""))            // from now on: no Date at all
package dateproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// Date says what Date header the proxy sends. The zero Date passes the
// upstream's as it is (none if it sent none).
type Date struct {
	kind   kind
	offset time.Duration
	raw    string
}

type kind int8

const (
	pass kind = iota
	shift
	stamp
	raw
)

// Shift moves the upstream's own Date by offset: the server's clock, off by
// offset. An answer without a parsable Date fails the test (the upstream
// is not what the test assumes) and reaches the client as a 502.
func Shift(offset time.Duration) Date { return Date{kind: shift, offset: offset} }

// Stamp replaces any upstream Date with this machine's clock moved by
// offset, read when the answer passes the proxy, as Cloudflare's edge
// stamps a Worker's answer (Miniflare sends no Date of its own).
func Stamp(offset time.Duration) Date { return Date{kind: stamp, offset: offset} }

// Raw sends v as the Date header verbatim (garbage, another format); ""
// sends no Date header at all.
func Raw(v string) Date { return Date{kind: raw, raw: v} }

func (d Date) String() string {
	sign := "+"
	if d.offset < 0 {
		sign = ""
	}
	switch d.kind {
	case shift:
		return fmt.Sprintf("upstream Date %s%v", sign, d.offset)
	case stamp:
		return fmt.Sprintf("this machine's clock %s%v", sign, d.offset)
	case raw:
		return fmt.Sprintf("Date %q", d.raw)
	}
	return "upstream Date as is"
}

// Proxy is a running proxy. Its methods are safe for concurrent use.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:PORT: point the
	// client at it instead of the upstream.
	URL string

	date atomic.Pointer[Date]
}

// Set changes the Date of every answer from now on.
func (p *Proxy) Set(d Date) { p.date.Store(&d) }

// Start proxies to target (a base URL such as http://127.0.0.1:PORT) on
// 127.0.0.1 with Date d, and closes the proxy in tb.Cleanup. Requests and
// answers pass unchanged but for Date (and the forwarding headers
// httputil.ReverseProxy adds).
func Start(tb testing.TB, target string, d Date) *Proxy {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		tb.Fatalf("dateproxy: target %q is not a base URL (%v)", target, err)
	}
	p := &Proxy{}
	p.Set(d)
	// Its own transport, so Cleanup can close the idle connections to the
	// upstream: a leak check at the end of the tests finds none.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	rp.ModifyResponse = func(r *http.Response) error {
		d := p.date.Load()
		if d.kind == pass {
			return nil
		}
		v, err := d.header(r.Header.Get("Date"))
		if err != nil {
			tb.Errorf("dateproxy: %v", err)
			return err
		}
		r.Header.Del("Date")
		if v != "" {
			r.Header.Set("Date", v)
		}
		return nil
	}
	// Not the default, which logs through the log package: the client
	// gets the reason in a 502 and the test fails on it.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, "dateproxy: "+err.Error(), http.StatusBadGateway)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A nil Date stops net/http adding its own when the answer is
		// to have none.
		w.Header()["Date"] = nil
		rp.ServeHTTP(w, r)
	}))
	// Close waits for the handlers, so none reports to tb after the test.
	tb.Cleanup(func() {
		srv.Close()
		tr.CloseIdleConnections()
	})
	p.URL = srv.URL
	return p
}

// header returns the Date to send for an answer whose upstream Date is
// upstream; "" for none.
func (d *Date) header(upstream string) (string, error) {
	switch d.kind {
	case shift:
		t, err := http.ParseTime(upstream)
		if err != nil {
			return "", fmt.Errorf("cannot shift the upstream's Date %q: %v", upstream, err)
		}
		return t.Add(d.offset).UTC().Format(http.TimeFormat), nil
	case stamp:
		return time.Now().Add(d.offset).UTC().Format(http.TimeFormat), nil
	}
	return d.raw, nil
}
