// Command flakes runs the short test suite of the given packages N times
// with every core kept busy by tools/cpuload, and prints each failed test
// with the command that replays it: the package, a -run pattern naming
// that test alone, and the seed flag the test logged, if any. A test that
// passes alone on an idle machine but fails here depends on the machine's
// speed.
//
//	go run ./tools/flakes [-rounds N] [-load=false] [-flags '-race -short -count=1'] PACKAGES...
//
// make flakes passes every module's packages. The load generator is built
// and started once, and killed by its PID when the rounds end or the
// command is interrupted; go test runs in its own process group, which an
// interrupt kills with it. It exits 1 when any round had a failure.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// modulePath is the root module's path: a package's directory is its
// import path with this prefix replaced by ".".
const modulePath = "github.com/kvbreaker/kvbreaker"

func main() {
	rounds := flag.Int("rounds", 1, "how many times to run the suite (at least 1)")
	load := flag.Bool("load", true, "keep every core busy with tools/cpuload while the suite runs")
	gotest := flag.String("flags", "-race -short -count=1", "flags for go test (-json is added)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./tools/flakes [-rounds N] [-load=false] [-flags FLAGS] PACKAGES...\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *rounds < 1 || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Stdout, *rounds, *load, strings.Fields(*gotest), flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "flakes:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, w io.Writer, rounds int, load bool, flags, pkgs []string) (int, error) {
	if load {
		kill, err := startLoad(ctx, w)
		if err != nil {
			return 2, err
		}
		defer kill()
	}
	var all []failure
	for r := 1; r <= rounds; r++ {
		start := time.Now()
		fails, passed, err := round(ctx, flags, pkgs)
		if err != nil {
			return 2, fmt.Errorf("round %d: %w", r, err)
		}
		fmt.Fprintf(w, "round %d/%d: %d tests passed, %d failed, %v\n", r, rounds, passed, len(fails), time.Since(start).Round(time.Second))
		for _, f := range fails {
			f.round = r
			f.print(w, flags)
		}
		all = append(all, fails...)
	}
	fmt.Fprintf(w, "flakes: %d failures in %d rounds\n", len(all), rounds)
	if len(all) > 0 {
		return 1, nil
	}
	return 0, nil
}

// startLoad builds tools/cpuload and starts it; the returned func kills it
// by its PID and reaps it.
func startLoad(ctx context.Context, w io.Writer) (func(), error) {
	dir, err := os.MkdirTemp("", "kvbreaker-flakes-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "cpuload")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, modulePath+"/tools/cpuload")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("building tools/cpuload: %w", err)
	}
	cmd := exec.Command(bin, "-n", fmt.Sprint(runtime.NumCPU()))
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting tools/cpuload: %w", err)
	}
	fmt.Fprintf(w, "load: tools/cpuload, %d spinning goroutines, PID %d\n", runtime.NumCPU(), cmd.Process.Pid)
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		os.RemoveAll(dir)
		fmt.Fprintf(w, "load: PID %d stopped\n", cmd.Process.Pid)
	}, nil
}

// event is one line of `go test -json`.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// failure is a failed test (Test == "": a package that failed outside any
// test: a build error, a panic, a timeout).
type failure struct {
	round     int
	pkg, test string
	output    []string
}

// round runs go test once and returns its failed leaf tests and the number
// of tests that passed.
func round(ctx context.Context, flags, pkgs []string) ([]failure, int, error) {
	args := append(append([]string{"test", "-json"}, flags...), pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	// Its own process group, so an interrupt stops the test binaries too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	fails, passed, perr := parse(out)
	werr := cmd.Wait()
	close(done)
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	if perr != nil {
		return nil, 0, perr
	}
	var exit *exec.ExitError
	if werr != nil && !errors.As(werr, &exit) {
		return nil, 0, werr
	}
	if werr != nil && len(fails) == 0 {
		return nil, 0, fmt.Errorf("go test failed without a failed test or package: %v", werr)
	}
	return fails, passed, nil
}

// parse reads go test -json and returns the failed tests that have no
// failed subtest (a parent fails with its subtests), then the packages
// that failed with no failed test.
func parse(r io.Reader) ([]failure, int, error) {
	type key struct{ pkg, test string }
	output := map[key][]string{}
	failed := map[key]bool{}
	var order []key
	passed := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // go test prints build output that is not JSON
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "output":
			output[k] = append(output[k], strings.TrimRight(e.Output, "\n"))
		case "pass":
			if e.Test != "" {
				passed++
			}
		case "fail":
			failed[k] = true
			order = append(order, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	var fails []failure
	pkgHasTest := map[string]bool{}
	for _, k := range order {
		if k.test == "" {
			continue
		}
		pkgHasTest[k.pkg] = true
		leaf := true
		for o := range failed {
			if o.pkg == k.pkg && strings.HasPrefix(o.test, k.test+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			fails = append(fails, failure{pkg: k.pkg, test: k.test, output: output[k]})
		}
	}
	for _, k := range order {
		if k.test == "" && !pkgHasTest[k.pkg] {
			fails = append(fails, failure{pkg: k.pkg, output: output[k]})
		}
	}
	return fails, passed, nil
}

// seedFlag finds a seed flag a test logged (-seed 42, -failover.seed=7).
var seedFlag = regexp.MustCompile(`(-[\w.]*seed)[ =](\d+)`)

// replay is the command that runs f's test alone: its package's directory,
// and a -run pattern anchored at each level of the test's name.
func (f failure) replay(flags []string) string {
	dir := "." + strings.TrimPrefix(f.pkg, modulePath)
	// One package needs no -p; the -run given here replaces any other.
	var kept []string
	for i := 0; i < len(flags); i++ {
		switch fl := flags[i]; {
		case fl == "-p" || fl == "-run":
			i++ // and its value
		case fl == "-json" || strings.HasPrefix(fl, "-p=") || strings.HasPrefix(fl, "-run="):
		default:
			kept = append(kept, fl)
		}
	}
	cmd := "go test " + strings.Join(kept, " ")
	if f.test != "" {
		parts := strings.Split(f.test, "/")
		for i, p := range parts {
			parts[i] = "^" + regexp.QuoteMeta(p) + "$"
		}
		cmd += " -run '" + strings.Join(parts, "/") + "'"
	}
	cmd += " " + dir
	var seeds []string
	for _, line := range f.output {
		for _, m := range seedFlag.FindAllStringSubmatch(line, -1) {
			if s := m[1] + " " + m[2]; !slices.Contains(seeds, s) {
				seeds = append(seeds, s)
			}
		}
	}
	if len(seeds) > 0 {
		cmd += " -args " + strings.Join(seeds, " ")
	}
	return cmd
}

// tail is how many of a failed test's last output lines are printed.
const tail = 40

func (f failure) print(w io.Writer, flags []string) {
	name := f.test
	if name == "" {
		name = "(package)"
	}
	fmt.Fprintf(w, "FAIL round %d: %s %s\n  replay: %s\n", f.round, f.pkg, name, f.replay(flags))
	out := f.output
	if len(out) > tail {
		out = out[len(out)-tail:]
	}
	for _, line := range out {
		fmt.Fprintf(w, "  | %s\n", line)
	}
}
