package main

import (
	"bufio"
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptCleansUp: Ctrl-C (SIGINT) during check deletes every key the
// check wrote, within a few seconds, and exits 130. A built binary runs the
// full check (its expiry cases wait in real time, so keys are live) against
// the test etcd; the test lists the keys under the check's prefix before
// the signal (some: the count can see them) and after (none). Killed at
// once by the signal, check would leave its keys in the store until their
// TTL.
func TestInterruptCleansUp(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.Command(bin, append([]string{"check", "--format", "json"}, connArgs("etcd")...)...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // our own child, by its PID
			_ = cmd.Wait()
		}
	})
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var prefix string
	re := regexp.MustCompile(`under prefix "([^"]+)"`)
	var errLines []string
	deadline := time.After(30 * time.Second)
	for prefix == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("check ended before it started: %q", errLines)
			}
			errLines = append(errLines, l)
			if m := re.FindStringSubmatch(l); m != nil {
				prefix = m[1]
			}
		case <-deadline:
			t.Fatalf("no prefix line from check: %q", errLines)
		}
	}
	// Wait until the check has keys under its prefix.
	var before int
	for start := time.Now(); before == 0 && time.Since(start) < 20*time.Second; {
		if before = leftovers(t, "etcd", prefix); before == 0 {
			time.Sleep(50 * time.Millisecond) // polling the server, not waiting on logic
		}
	}
	if before == 0 {
		t.Fatal("the check never had a key under its prefix: the count cannot show a leftover")
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		errLines = append(errLines, l)
	}
	err = cmd.Wait()
	took := time.Since(sent)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("exit %v, want %d\nstderr:\n%s", err, exitInterrupted, strings.Join(errLines, "\n"))
	}
	// Exit 130 and the message show the interrupt's path was taken; this
	// bounds it: the check deletes for at most interruptCleanup and its
	// cases end with the context. The half minute beside it is for a
	// loaded machine's slow exit, not for the code.
	if took > interruptCleanup+30*time.Second {
		t.Errorf("took %v after SIGINT: want about %v (the cleanup's bound) at most", took, interruptCleanup)
	}
	if n := leftovers(t, "etcd", prefix); n != 0 {
		t.Errorf("%d keys left under %q after Ctrl-C (%d before)\nstderr:\n%s", n, prefix, before, strings.Join(errLines, "\n"))
	}
	if !strings.Contains(strings.Join(errLines, "\n"), "interrupted; deleting what the check wrote") {
		t.Errorf("stderr does not say it cleans up:\n%s", strings.Join(errLines, "\n"))
	}
	t.Logf("%d keys under %s before SIGINT; exit %d %v after it", before, prefix, ee.ExitCode(), took.Round(time.Millisecond))
}
