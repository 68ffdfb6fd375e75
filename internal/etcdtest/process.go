package etcdtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// childEnv carries a child server's configuration (JSON) from StartProcess
// to Main in the re-run test binary.
const childEnv = "KVBREAKER_ETCDTEST_CHILD"

// readyLine is what a child prints once its server is ready.
const readyLine = "etcdtest: ready"

type childConfig struct {
	DataDir, Client, Peer string
}

// Main serves etcd and exits when this process was started by StartProcess;
// otherwise it returns at once. Call it first in TestMain of any package
// that uses StartProcess:
//
//	func TestMain(m *testing.M) {
//		etcdtest.Main()
//		os.Exit(m.Run())
//	}
func Main() {
	raw := os.Getenv(childEnv)
	if raw == "" {
		return
	}
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest child: bad %s: %v\n", childEnv, err)
		os.Exit(2)
	}
	e, err := startEmbedded(c.DataDir, c.Client, c.Peer)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdtest child: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(readyLine)
	// Stop on a signal, or when the parent closes our stdin (or dies).
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-done:
	case <-sig:
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcdtest child: %v\n", err)
	}
	e.Close()
	os.Exit(0)
}

// startProcess starts the child server; s.mu is held.
func (s *Server) startProcess() error {
	cfg, err := json.Marshal(childConfig{DataDir: s.DataDir(), Client: s.client, Peer: s.peer})
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+string(cfg))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("etcdtest: start child %s: %w", os.Args[0], err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == readyLine {
				ok = true
				break
			}
		}
		ready <- ok
		io.Copy(io.Discard, stdout) // until the child exits
	}()
	fail := func(why string) error {
		cmd.Process.Kill()
		stdin.Close()
		cmd.Wait()
		return fmt.Errorf("etcdtest: child server (pid %d) on %s %s; does this package's TestMain call etcdtest.Main() first?",
			cmd.Process.Pid, s.client, why)
	}
	select {
	case ok := <-ready:
		if !ok {
			return fail("exited before it was ready")
		}
	case <-time.After(startTimeout):
		return fail(fmt.Sprintf("not ready after %v", startTimeout))
	}
	s.cmd, s.stdin = cmd, stdin
	return nil
}

// stopGrace bounds a graceful child stop before it is killed.
const stopGrace = 10 * time.Second

// stopProcess ends the child (gracefully unless kill) and waits for it;
// s.mu is held.
func (s *Server) stopProcess(kill bool) {
	cmd := s.cmd
	s.cmd = nil
	if kill {
		cmd.Process.Kill()
	} else {
		cmd.Process.Signal(syscall.SIGTERM)
	}
	s.stdin.Close()
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(stopGrace):
		cmd.Process.Kill()
		<-exited
	}
}

// Kill ends a StartProcess server abruptly (SIGKILL), as a crash would; for
// an in-process server it is Stop.
func (s *Server) Kill() {
	s.mu.Lock()
	if s.cmd != nil {
		defer s.mu.Unlock()
		s.stopProcess(true)
		return
	}
	s.mu.Unlock()
	s.Stop()
}
