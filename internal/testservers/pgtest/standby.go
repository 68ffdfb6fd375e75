package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartStandby makes a standby of primary as an operator does: a base
// backup taken over the replication protocol (pg_basebackup -R, which
// writes standby.signal and primary_conninfo), started on a port of its
// own with primary's options, streaming primary's log asynchronously
// unless the primary names it in synchronous_standby_names. It waits
// until the primary counts it as streaming.
func StartStandby(ctx context.Context, primary *Server) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	s := &Server{dir: dir, bin: primary.bin, cred: primary.cred, opts: primary.opts}
	if err := s.chownDir(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.baseBackup(ctx, primary); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.startOnFreePort(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := primary.WaitStreaming(ctx, 1); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// MustStartStandby is StartStandby for tb, closed when tb finishes.
func MustStartStandby(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	s, err := StartStandby(tb.Context(), primary)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Rejoin makes a stopped or failed server a standby of primary again:
// its data is discarded and copied afresh from primary (pg_basebackup
// -R), as an operator brings back a primary that was replaced. It waits
// until primary counts it as streaming.
func (s *Server) Rejoin(ctx context.Context, primary *Server) error {
	s.Kill()
	if err := os.RemoveAll(s.DataDir()); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return s.followAfresh(ctx, primary)
}

// followAfresh copies primary's data (baseBackup) and starts s as its
// standby on s's own port, and waits until primary counts it as
// streaming.
func (s *Server) followAfresh(ctx context.Context, primary *Server) error {
	if err := s.baseBackup(ctx, primary); err != nil {
		return err
	}
	if err := s.Restart(ctx); err != nil {
		return err
	}
	return primary.WaitStreaming(ctx, 1)
}

// baseBackup copies primary's data into s's data directory, with the
// settings that make it a standby (pg_basebackup -R).
func (s *Server) baseBackup(ctx context.Context, primary *Server) error {
	cmd := s.command(ctx, "pg_basebackup", "-D", s.DataDir(), "-R", "-X", "stream", "--no-sync",
		"-h", "127.0.0.1", "-p", fmt.Sprint(primary.port), "-U", User, "-c", "fast")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_basebackup from %s: %v\n%s", primary.Addr(), err, out)
	}
	return nil
}

// Promote ends recovery on a standby (pg_ctl promote) and waits until it
// accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	cmd := s.command(ctx, "pg_ctl", "promote", "-w", "-t", "60", "-D", s.DataDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl promote on %s: %v\n%s", s.Addr(), err, out)
	}
	return nil
}

// WaitStreaming waits until s counts at least n standbys streaming its
// log (pg_stat_replication).
func (s *Server) WaitStreaming(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last string
	for {
		out, err := s.Query(ctx, "select count(*) from pg_stat_replication where state = 'streaming'")
		if got, aerr := strconv.Atoi(out); err == nil && aerr == nil && got >= n {
			return nil
		}
		last = fmt.Sprintf("%q %v", out, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: %s has no %d streaming standbys: %s: %w", s.Addr(), n, last, ctx.Err())
		case <-time.After(50 * time.Millisecond): // waiting on the server, not on our logic
		}
	}
}

// Query runs one SQL statement through psql on the server's socket and
// returns its unaligned, tuples-only output.
func (s *Server) Query(ctx context.Context, sql string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := s.command(cctx, "psql", "-h", s.dir, "-p", fmt.Sprint(s.port), "-U", User, "-d", "postgres",
		"-X", "-A", "-t", "-c", sql).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// chownDir gives the server's directory to the user it runs as.
func (s *Server) chownDir() error {
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: give %s to the postgres user: %w", s.dir, err)
		}
	}
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}
