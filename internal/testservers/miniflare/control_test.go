package miniflare

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// hangUpOnSecond serves HTTP on 127.0.0.1 and, on each connection, answers
// the first request with a kept-alive clock and closes the connection on
// reading a second one: what a server does when its idle timer fires as a
// request arrives.
func hangUpOnSecond(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewReader(c)
				for n := 0; ; n++ {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if n > 0 {
						return
					}
					body := `{"now_ms":1000}`
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"+body)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAdvanceSurvivesServerHangUp: two advances in a row against a server
// that closes a connection on its second request both succeed, because each
// control request has a connection of its own.
func TestAdvanceSurvivesServerHangUp(t *testing.T) {
	s := &Server{URL: hangUpOnSecond(t)}
	for i := range 3 {
		if err := s.Advance(t.Context(), time.Second); err != nil {
			t.Fatalf("advance %d: %v", i+1, err)
		}
	}
	if got := s.Now(); !got.Equal(time.UnixMilli(1000)) {
		t.Errorf("Now = %v, want the server's clock", got)
	}
}

// TestKeptAliveControlFailsOnHangUp is the negative control: the same
// requests over a kept-alive connection fail the way CI saw
// (`Post ".../__kvbreaker/advance?ms=999": EOF`).
func TestKeptAliveControlFailsOnHangUp(t *testing.T) {
	url := hangUpOnSecond(t) + "/__kvbreaker/advance?ms=1000"
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	var last error
	for range 2 {
		res, err := client.Post(url, "", nil)
		if err != nil {
			last = err
			break
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
	}
	if last == nil {
		t.Fatal("a second POST on the kept-alive connection succeeded: the hang-up fixture does not reproduce the failure")
	}
	t.Logf("kept-alive client: %v", last)
}
