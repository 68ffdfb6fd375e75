package etcdtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
	"github.com/kvbreaker/kvbreaker/internal/testservers/launcher"
)

// Cluster is a multi-member etcd cluster of child processes on 127.0.0.1,
// each member behind two proxies: a faultproxy between the clients and
// the member (Endpoints), and a peer proxy that every other member reaches
// it through (its advertised peer URL). The peer proxy reads the sender of
// each raft connection from its first request's X-Server-From header, so
// Partition can cut one member off in both directions: the connections the
// others open to it and those it opens to them.
type Cluster struct {
	Members []*Member
}

// Member is one member of a Cluster. Kill, Stop, Pause, Resume and PID
// come from its launcher.Server.
type Member struct {
	launcher.Server
	Name   string
	dir    string
	client string // direct client URL
	peer   string // peer listen URL
	cfg    []byte
	// Client is the faultproxy between clients and this member.
	Client *faultproxy.Proxy
	peerp  *peerProxy
	id     string // raft member ID, hex (as X-Server-From carries it)
}

// StartCluster starts an n-member cluster (n ≥ 1) and waits until every
// member answers; Close stops it and removes its data.
func StartCluster(ctx context.Context, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdtest: a cluster needs at least one member, not %d", n)
	}
	c := &Cluster{}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range n {
		dir, err := os.MkdirTemp("", "etcdtest-cluster-")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdtest: temp dir: %w", err)
		}
		m := &Member{
			Server: launcher.Server{Name: fmt.Sprintf("etcdtest m%d", i), Grace: stopGrace},
			Name:   fmt.Sprintf("m%d", i),
			dir:    dir,
			client: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			peer:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		c.Members = append(c.Members, m)
		if m.Client, err = faultproxy.Start(strings.TrimPrefix(m.client, "http://")); err != nil {
			c.Close()
			return nil, err
		}
		if m.peerp, err = startPeerProxy(strings.TrimPrefix(m.peer, "http://")); err != nil {
			c.Close()
			return nil, err
		}
		initial = append(initial, m.Name+"=http://"+m.peerp.addr())
	}
	for _, m := range c.Members {
		m.cfg, err = json.Marshal(map[string]any{
			"DataDir": filepath.Join(m.dir, "data"), "Client": m.client, "Peer": m.peer,
			"TickMs": TickMs, "ElectionMs": ElectionMs,
			"Name": m.Name, "InitialCluster": strings.Join(initial, ","), "AdvertisePeer": "http://" + m.peerp.addr(),
		})
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	// A member is ready only once a quorum is up, so all start at once.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.Restart(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	for _, m := range c.Members {
		st, err := m.status(ctx)
		if err != nil {
			c.Close()
			return nil, err
		}
		m.id = st.member
	}
	return c, nil
}

// MustStartCluster starts an n-member cluster for tb and closes it when tb
// finishes; it fails tb if the cluster cannot start.
func MustStartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c, err := StartCluster(tb.Context(), n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Endpoints returns the client URLs of the members' client proxies.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.Members {
		out = append(out, "http://"+m.Client.Addr())
	}
	return out
}

// Restart starts a stopped or killed member again on its ports and data.
func (m *Member) Restart(ctx context.Context) error {
	return m.Server.Restart(ctx, func(ctx context.Context) (*launcher.Process, error) {
		bin, err := binary(ctx)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), configEnv+"="+string(m.cfg))
		p, _, err := launcher.Start(ctx, "etcd "+m.Name, cmd, func(line []byte) (string, bool) {
			return "", strings.TrimSpace(string(line)) == readyLine
		}, startTimeout)
		if err != nil {
			return nil, fmt.Errorf("etcdtest: start member %s on %s: %w", m.Name, m.client, err)
		}
		return p, nil
	})
}

// Leader returns the index of the member that is leader, as the first
// running member that answers says (directly, not through the proxies).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	var errs []error
	for i := range c.Members {
		l, err := c.LeaderSeenBy(ctx, i)
		if err == nil {
			return l, nil
		}
		errs = append(errs, err)
	}
	return -1, fmt.Errorf("etcdtest: no leader known: %w", errors.Join(errs...))
}

// LeaderSeenBy returns the index of the member that member i takes for the
// leader, asking it directly, within a second.
func (c *Cluster) LeaderSeenBy(ctx context.Context, i int) (int, error) {
	m := c.Members[i]
	if !m.Running() {
		return -1, fmt.Errorf("etcdtest: member %s is stopped", m.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := m.status(ctx)
	if err != nil {
		return -1, err
	}
	for j, o := range c.Members {
		if o.id == st.leader {
			return j, nil
		}
	}
	return -1, fmt.Errorf("etcdtest: member %s knows no leader (%q)", m.Name, st.leader)
}

// Partition cuts member i off from the other members (both directions of
// raft traffic) and from clients (its client proxy swallows requests, as a
// network that drops packets). Heal ends it.
func (c *Cluster) Partition(i int) {
	cut := c.Members[i]
	cut.peerp.block("*")
	for _, m := range c.Members {
		if m != cut {
			m.peerp.block(cut.id)
		}
	}
	cut.Client.Blackhole(true)
}

// Heal ends every partition and client-proxy fault; the connections that
// lost bytes are reset.
func (c *Cluster) Heal() {
	for _, m := range c.Members {
		m.peerp.unblock()
		m.Client.Heal()
	}
}

// Close kills every member (its data is removed, so a graceful stop
// would only cost its leader transfer), stops its proxies, and removes its
// data.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, m := range c.Members {
		wg.Go(func() {
			m.Kill()
			if m.Client != nil {
				m.Client.Close()
			}
			if m.peerp != nil {
				m.peerp.close()
			}
			if err := os.RemoveAll(m.dir); err != nil {
				fmt.Fprintf(os.Stderr, "etcdtest: remove %s: %v\n", m.dir, err)
			}
		})
	}
	wg.Wait()
}

type memberStatus struct{ member, leader string }

// status asks the member (directly) for its ID and its leader's, through
// etcd's JSON gateway, so that this package needs no etcd client.
func (m *Member) status(ctx context.Context) (memberStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.client+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return memberStatus{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return memberStatus{}, fmt.Errorf("etcdtest: status of %s: %w", m.Name, err)
	}
	defer resp.Body.Close()
	var body struct {
		Header struct {
			MemberID string `json:"member_id"`
		} `json:"header"`
		Leader string `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return memberStatus{}, fmt.Errorf("etcdtest: status of %s: %w", m.Name, err)
	}
	hex := func(dec string) string {
		v, err := strconv.ParseUint(dec, 10, 64)
		if err != nil {
			return ""
		}
		return strconv.FormatUint(v, 16)
	}
	st := memberStatus{member: hex(body.Header.MemberID), leader: hex(body.Leader)}
	if st.member == "" {
		return st, fmt.Errorf("etcdtest: status of %s: no member id (HTTP %d)", m.Name, resp.StatusCode)
	}
	return st, nil
}

// peerProxy forwards raft traffic to one member and drops the connections
// of blocked senders.
type peerProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	blocked  map[string]bool // sender IDs; "*" blocks every sender
	conns    map[*peerConn]struct{}
	wg       sync.WaitGroup
}

type peerConn struct {
	from     string
	down, up net.Conn
}

func startPeerProxy(upstream string) (*peerProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("etcdtest: peer proxy: %w", err)
	}
	p := &peerProxy{ln: ln, upstream: upstream, blocked: map[string]bool{}, conns: map[*peerConn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

func (p *peerProxy) addr() string { return p.ln.Addr().String() }

func (p *peerProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// maxHeader bounds the request head read to learn the sender.
const maxHeader = 64 << 10

func (p *peerProxy) serve(down net.Conn) {
	defer down.Close()
	_ = down.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(down, maxHeader)
	var head []byte
	// Peek(n+1) waits for at least one byte more than seen, never for a
	// fixed count a short request would not fill.
	for n := 0; ; {
		b, err := br.Peek(n + 1)
		if err != nil || len(b) >= maxHeader {
			return
		}
		b, _ = br.Peek(br.Buffered())
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			head = b[:i+4]
			break
		}
		n = len(b)
	}
	_ = down.SetReadDeadline(time.Time{})
	from := ""
	if req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head))); err == nil {
		from = req.Header.Get("X-Server-From")
	}
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	pc := &peerConn{from: from, down: down, up: up}
	p.mu.Lock()
	if p.blocked["*"] || (from != "" && p.blocked[from]) {
		p.mu.Unlock()
		return
	}
	p.conns[pc] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(down, up)
		down.Close()
		close(done)
	}()
	_, _ = io.Copy(up, br)
	up.Close()
	<-done
}

// block drops from's connections now and refuses its new ones ("*": all).
func (p *peerProxy) block(from string) {
	p.mu.Lock()
	p.blocked[from] = true
	var cut []*peerConn
	for c := range p.conns {
		if from == "*" || c.from == from {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		c.down.Close()
		c.up.Close()
	}
}

func (p *peerProxy) unblock() {
	p.mu.Lock()
	clear(p.blocked)
	p.mu.Unlock()
}

func (p *peerProxy) close() {
	p.ln.Close()
	p.block("*")
	p.wg.Wait()
}
