//go:build unix

package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/driver"
)

// The worker processes: each is this test binary run again with workerEnv
// set (TestMain), and its parameters in these variables. It says "ready"
// once it has opened the file, waits for its standard input to close (so
// that all workers start together), does its work, and prints what it
// saw, one line per fact.
const (
	envPath    = "KVBREAKER_SQLITE_PATH"
	envHost    = "KVBREAKER_SQLITE_HOST"
	envClock   = "KVBREAKER_SQLITE_CLOCK" // the Breakers' clock, Unix ns
	envWorkers = "KVBREAKER_SQLITE_GOROUTINES"
	envCount   = "KVBREAKER_SQLITE_COUNT"
)

// fleetSettings are the Breakers' settings in the process fleet.
var fleetSettings = kvbreaker.Settings{FailureThreshold: 3, FailureWindow: time.Minute, RecoveryDelay: 10 * time.Minute, SkipClockCheck: true}

func runWorker(name string) int {
	if err := worker(name); err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: %v\n", name, err)
		return 1
	}
	return 0
}

func worker(name string) error {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, os.Getenv(envPath))
	if err != nil {
		return err
	}
	defer s.Close()
	n, _ := strconv.Atoi(os.Getenv(envWorkers))
	count, _ := strconv.Atoi(os.Getenv(envCount))
	host := os.Getenv(envHost)
	if name == "spill" {
		return spill(ctx, s)
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return err
	}
	switch name {
	case "failures", "allows":
		ns, _ := strconv.ParseInt(os.Getenv(envClock), 10, 64)
		var opened, probes, holds atomic.Int64
		set := fleetSettings
		set.Clock = func() time.Time { return time.Unix(0, ns) }
		set.OnStateChange = func(_ string, from, to kvbreaker.State) {
			if from == kvbreaker.StateClosed && to == kvbreaker.StateOpen {
				opened.Add(1)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			b, err := kvbreaker.New(s, set)
			if err != nil {
				return err
			}
			wg.Go(func() {
				if name == "failures" {
					if err := b.Failure(ctx, host); err != nil {
						errs <- err
					}
					return
				}
				v, err := b.Allow(ctx, host, time.Time{})
				switch {
				case err != nil:
					errs <- err
				case v.Decision == kvbreaker.Probe:
					probes.Add(1)
				case v.Decision == kvbreaker.Hold:
					holds.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return err
		}
		fmt.Printf("opened %d\nprobes %d\nholds %d\n", opened.Load(), probes.Load(), holds.Load())
	case "increments":
		// count read-then-swap increments of host's decimal value, each
		// retried on conflict; "ack N" after each commit.
		for range count {
			for {
				v, ver, err := s.Get(ctx, host)
				var cur int
				switch {
				case errors.Is(err, driver.ErrNotFound):
					ver = driver.NoVersion
				case err != nil:
					return err
				default:
					cur, _ = strconv.Atoi(string(v))
				}
				_, err = s.CompareAndSwap(ctx, host, ver, []byte(strconv.Itoa(cur+1)), time.Hour)
				if errors.Is(err, driver.ErrConflict) {
					continue
				}
				if err != nil {
					return err
				}
				fmt.Printf("ack %d\n", cur+1)
				break
			}
		}
	default:
		return fmt.Errorf("no worker %q", name)
	}
	return nil
}

// spill begins a write transaction with a page cache too small for it, so
// that SQLite writes uncommitted pages to the WAL, says "spilled", and
// waits (for its kill).
func spill(ctx context.Context, s *sqlite.Store) error {
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{"PRAGMA cache_size = 8", "BEGIN IMMEDIATE"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	big := strings.Repeat("x", 4000)
	for i := range 1000 {
		if _, err := conn.ExecContext(ctx, "INSERT INTO kvbreaker (key, value, version, expires_at, purge_at) VALUES (?, ?, ?, ?, ?)",
			fmt.Sprintf("spill/%04d", i), []byte(big), 1, int64(1)<<62, int64(1)<<62); err != nil {
			return err
		}
	}
	fmt.Println("spilled")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// proc is a running worker process.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its standard output, closed at its end
}

// startWorker runs worker name on path and waits for its first line.
func startWorker(t *testing.T, name, path string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{workerEnv + "=" + name, envPath + "=" + path}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stdin: stdin, lines: make(chan string, 1<<16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by its PID; a no-op once it has exited
		for range p.lines {
		}
		_ = cmd.Wait()
	})
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("worker %s ended before it was ready", name)
		}
		_ = line
	case <-time.After(time.Minute):
		t.Fatalf("worker %s not ready within a minute", name)
	}
	return p
}

// runWorkers starts n workers, releases them together and returns every
// line they printed, summed by their first word ("opened 1" → opened: 1).
func runWorkers(t *testing.T, name, path string, n int, env ...string) map[string]int {
	t.Helper()
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = startWorker(t, name, path, env...)
	}
	for _, p := range procs {
		p.stdin.Close()
	}
	sum := map[string]int{}
	for i, p := range procs {
		for line := range p.lines {
			word, num, _ := strings.Cut(line, " ")
			v, err := strconv.Atoi(num)
			if err != nil {
				t.Fatalf("worker %d: %q", i, line)
			}
			sum[word] += v
		}
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker %s %d: %v", name, i, err)
		}
	}
	return sum
}

// TestProcessFleet: four worker processes of sixteen Breakers each (64
// workers) share one file and one host's record. 64 concurrent failures
// open the circuit exactly once across the processes, with the threshold's
// failures in its record; at the restraint's end exactly one of 64
// concurrent Allows across the processes is told Probe.
func TestProcessFleet(t *testing.T) {
	path := tempDB(t)
	s := open(t, path)
	const host = "inbox.example"
	t0 := time.Now().Truncate(time.Millisecond)
	at := func(t time.Time) string { return envClock + "=" + strconv.FormatInt(t.UnixNano(), 10) }
	got := runWorkers(t, "failures", path, 4, envHost+"="+host, envWorkers+"=16", at(t0))
	if got["opened"] != 1 {
		t.Fatalf("64 failures over 4 processes: %d closed→open transitions, want 1", got["opened"])
	}
	set := fleetSettings
	set.Clock = func() time.Time { return t0 }
	b, err := kvbreaker.New(s, set)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Inspect(t.Context(), host)
	if err != nil || st.State != kvbreaker.StateOpen || len(st.Failures) != 3 {
		t.Fatalf("after the failures: %+v, %v; want open with 3 failures", st, err)
	}
	got = runWorkers(t, "allows", path, 4, envHost+"="+host, envWorkers+"=16", at(st.RestrainedUntil))
	if got["probes"] != 1 || got["holds"] != 63 {
		t.Fatalf("64 Allows over 4 processes at the restraint's end: %v, want 1 probe and 63 holds", got)
	}
}

// TestProcessIncrements: four processes each make 50 read-then-swap
// increments of one counter: none is lost, so the counter is 200 and every
// value from 1 to 200 was acknowledged exactly once.
func TestProcessIncrements(t *testing.T) {
	path := tempDB(t)
	s := open(t, path)
	got := runWorkers(t, "increments", path, 4, envHost+"=counter", envCount+"=50")
	if want := 200 * 201 / 2; got["ack"] != want {
		t.Errorf("acknowledged values sum to %d, want %d (1 … 200 once each)", got["ack"], want)
	}
	v, _, err := s.Get(t.Context(), "counter")
	if err != nil || string(v) != "200" {
		t.Errorf("counter = %q, %v; want 200", v, err)
	}
}

// TestKillMidWrite kills worker processes with SIGKILL in the middle of
// writes, and checks the file after each: PRAGMA integrity_check is ok,
// the write lock the dead process held is free, nothing of an uncommitted
// transaction is there, and the counter holds the last acknowledged value
// or the one being written. Then the whole conformance suite runs on the
// same file.
//
//   - spill: the process is killed holding the write lock, with
//     uncommitted pages of a 4 MB transaction already in the WAL;
//   - increments: a process that writes without pause is killed at once
//     after a random number of acknowledged writes, three times.
func TestKillMidWrite(t *testing.T) {
	path := tempDB(t)
	s := open(t, path, sqlite.WithBusyTimeout(10*time.Second))
	ctx := t.Context()
	check := func(when string) {
		t.Helper()
		var res string
		if err := s.DB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
			t.Fatalf("%s: integrity_check = %q, %v", when, res, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := s.CompareAndSwap(wctx, "after-kill/"+when, driver.NoVersion, []byte("x"), time.Hour); err != nil {
			t.Fatalf("%s: a write after the kill = %v", when, err)
		}
	}
	t.Run("spill", func(t *testing.T) {
		before := walSize(t, path)
		p := startWorker(t, "spill", path)
		if grew := walSize(t, path) - before; grew < 1<<20 {
			t.Fatalf("the WAL grew by %d bytes in the transaction, want its pages spilled there (≥ 1 MiB)", grew)
		}
		kill(t, p)
		check("spill")
		var n int
		if err := s.DB().QueryRowContext(ctx, "SELECT count(*) FROM kvbreaker WHERE key LIKE 'spill/%'").Scan(&n); err != nil || n != 0 {
			t.Errorf("%d rows of the killed transaction are in the file (%v), want none", n, err)
		}
	})
	t.Run("increments", func(t *testing.T) {
		last := 0
		for round := range 3 {
			p := startWorker(t, "increments", path, envHost+"=counter", envCount+"=1000000")
			p.stdin.Close()
			after := 5 + int(time.Now().UnixNano()%40)
			acked := func(line string) {
				if v, err := strconv.Atoi(strings.TrimPrefix(line, "ack ")); err == nil {
					last = v
				}
			}
			for i := 0; i < after; i++ {
				line, ok := <-p.lines
				if !ok {
					t.Fatalf("round %d: the worker ended", round)
				}
				acked(line)
			}
			for _, line := range kill(t, p) { // acknowledged before it died
				acked(line)
			}
			when := fmt.Sprintf("round-%d", round)
			check(when)
			v, _, err := s.Get(ctx, "counter")
			n, _ := strconv.Atoi(string(v))
			if err != nil || (n != last && n != last+1) {
				t.Fatalf("%s: counter = %q, %v; the last acknowledged was %d, so want %d or %d", when, v, err, last, last, last+1)
			}
			t.Logf("%s: killed after acknowledging %d; the file holds %d", when, last, n)
			last = n
		}
	})
	t.Run("conformance", func(t *testing.T) {
		conformanceOn(t, path)
	})
}

func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// kill sends SIGKILL to p, by its PID, waits for it to die and returns
// the lines it printed that were not read yet.
func kill(t *testing.T, p *proc) []string {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for line := range p.lines { // until the dead process's pipe ends
		rest = append(rest, line)
	}
	err := p.cmd.Wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the worker ended with %v, not by SIGKILL", err)
	}
	return rest
}
