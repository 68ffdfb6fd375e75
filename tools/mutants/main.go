// Command mutants is kvbreaker's mutation test: it applies single-point
// mutants to a package's source, one at a time, runs the package's own
// tests against each, and reports per file how many the tests killed, the
// survivors with their position and diff, and the kill rate.
//
//	make mutants                                       # the core: internal/machine, internal/record, the root package
//	make mutants MUTANTS='-pkg internal/record'        # one package
//	make mutants MUTANTS='-sample 40 -seed 7 -p 2'     # 40 random mutants per package, two at a time
//	go run ./tools/mutants -pkg internal/machine -list # the mutants and their keys, nothing run
//	go run ./tools/mutants -pkg . -match 'Close \| drop'  # only the mutants whose key matches
//	go run ./tools/mutants -pkg . -files '^mirror\.go$' -run 'Mirror' -sample 30  # one file, against the tests that exercise it
//
// The mutants (see Mutants): comparison operators flipped (< ↔ <=,
// > ↔ >=, == ↔ !=), && ↔ ||, integer literals 0 → 1, 1 → 0, n → n+1, an
// if's condition negated, a return inside an if's block removed, a call
// statement whose result is discarded removed. Each runs as
//
//	go test -count=1 -failfast -vet=off -timeout <timeout> -overlay <file> ./<pkg>
//
// from the root, with the overlay putting the mutated copy in place of the
// file: the source tree is never written. A mutant is killed when the
// tests fail (or time out), survives when they pass, and is unviable when
// it does not compile (not counted). Survivors listed in the equivalents
// file (default tools/mutants/equivalent.txt, one key per line as the
// report prints it, '#' comments) are behaviourally equivalent to the
// original: they are shown separately and left out of the rate.
//
// The unmutated package's tests must pass first. The exit status is 1 when
// a package's kill rate is below -min, or on an error.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

type config struct {
	root     string
	pkgs     []string
	sample   int
	seed     uint64
	par      int
	timeout  time.Duration
	equiv    string
	files    *regexp.Regexp
	match    *regexp.Regexp
	run      string
	kinds    map[string]bool
	list     bool
	min      float64
	progress io.Writer
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	c := &config{}
	pkgs := fs.String("pkg", "internal/machine,internal/record,.", "comma-separated package directories, relative to -root")
	fs.StringVar(&c.root, "root", ".", "the module root the packages are in (go test runs there)")
	fs.IntVar(&c.sample, "sample", 0, "run at most this many mutants per package, chosen at random by -seed (0: all)")
	fs.Uint64Var(&c.seed, "seed", 1, "the seed of -sample's choice")
	fs.IntVar(&c.par, "p", 1, "mutants tested at once (1 or 2 on a small machine)")
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "go test -timeout for one mutant; a mutant that reaches it is killed")
	fs.StringVar(&c.equiv, "equivalent", "tools/mutants/equivalent.txt", "the file of known-equivalent mutants' keys, relative to -root (\"\" for none)")
	files := fs.String("files", "", "only mutate files whose path (relative to -root) matches this regexp")
	match := fs.String("match", "", "only apply mutants whose key (as the report prints it) matches this regexp")
	fs.StringVar(&c.run, "run", "", "go test -run: only the tests that match (for a file whose tests are a small part of a slow package's; the unmutated run must pass them too)")
	kinds := fs.String("kinds", "", "comma-separated kinds to apply (cmp, logic, const, negate-if, drop-return, drop-call; default all)")
	fs.BoolVar(&c.list, "list", false, "list the mutants and their keys without running anything")
	fs.Float64Var(&c.min, "min", 0, "exit 1 when a package's kill rate (percent) is below this")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for p := range strings.SplitSeq(*pkgs, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.pkgs = append(c.pkgs, filepath.ToSlash(filepath.Clean(p)))
		}
	}
	if len(c.pkgs) == 0 {
		return nil, errors.New("-pkg names no package")
	}
	if c.par < 1 {
		return nil, fmt.Errorf("-p %d: want at least 1", c.par)
	}
	if c.sample < 0 {
		return nil, fmt.Errorf("-sample %d: want 0 (all) or more", c.sample)
	}
	if c.run != "" {
		if _, err := regexp.Compile(c.run); err != nil {
			return nil, fmt.Errorf("-run %q: %w", c.run, err)
		}
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("-timeout %v: want a positive duration", c.timeout)
	}
	if *files != "" {
		re, err := regexp.Compile(*files)
		if err != nil {
			return nil, fmt.Errorf("-files: %w", err)
		}
		c.files = re
	}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return nil, fmt.Errorf("-match: %w", err)
		}
		c.match = re
	}
	if *kinds != "" {
		c.kinds = map[string]bool{}
		valid := []string{KindCmp, KindLogic, KindConst, KindNegateIf, KindDropReturn, KindDropCall}
		for k := range strings.SplitSeq(*kinds, ",") {
			if !slices.Contains(valid, k) {
				return nil, fmt.Errorf("-kinds: unknown kind %q (want one of %s)", k, strings.Join(valid, ", "))
			}
			c.kinds[k] = true
		}
	}
	c.progress = os.Stderr
	if *quiet {
		c.progress = io.Discard
	}
	return c, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(c.root)
	if err != nil {
		return err
	}
	c.root = root
	equiv := map[string]bool{}
	if c.equiv != "" {
		if equiv, err = readEquivalents(filepath.Join(root, c.equiv)); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	low := false
	for _, pkg := range c.pkgs {
		ms, err := c.mutants(ctx, pkg)
		if err != nil {
			return err
		}
		if c.list {
			for _, m := range ms {
				fmt.Fprintf(out, "%s:%d:%d\t%s\n", m.File, m.Pos.Line, m.Pos.Column, m.Key())
			}
			continue
		}
		fmt.Fprintf(c.progress, "mutants: %s: baseline\n", pkg)
		if r := c.test(ctx, pkg, ""); r.outcome != survived {
			return fmt.Errorf("%s: the unmutated package's tests do not pass (%s):\n%s", pkg, r.outcome, r.output)
		}
		results := c.runAll(ctx, pkg, ms, tmp)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rate := report(out, pkg, c, ms, results, equiv)
		if rate < c.min {
			low = true
		}
	}
	if low {
		return fmt.Errorf("a kill rate is below -min %.1f%%", c.min)
	}
	return nil
}

// mutants lists pkg's non-test Go files (as go list sees them, build
// constraints applied) and their mutants, filtered and sampled.
func (c *config) mutants(ctx context.Context, pkg string) ([]Mutant, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-json", "./"+pkg)
	cmd.Dir = c.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./%s: %v: %s", pkg, err, stderr.Bytes())
	}
	var info struct{ GoFiles []string }
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("go list ./%s: %w", pkg, err)
	}
	var all []Mutant
	for _, f := range info.GoFiles {
		rel := filepath.ToSlash(filepath.Join(pkg, f))
		if c.files != nil && !c.files.MatchString(rel) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(c.root, rel))
		if err != nil {
			return nil, err
		}
		ms, err := Mutants(rel, src)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if (c.kinds == nil || c.kinds[m.Kind]) && (c.match == nil || c.match.MatchString(m.Key())) {
				all = append(all, m)
			}
		}
	}
	if c.sample > 0 && len(all) > c.sample {
		r := rand.New(rand.NewPCG(c.seed, 0))
		idx := r.Perm(len(all))[:c.sample]
		slices.Sort(idx)
		picked := make([]Mutant, len(idx))
		for i, j := range idx {
			picked[i] = all[j]
		}
		all = picked
	}
	return all, nil
}

type outcome string

const (
	killed   outcome = "killed"
	survived outcome = "survived"
	unviable outcome = "unviable" // does not compile
)

type result struct {
	outcome outcome
	by      string // the first failing test, or "timeout"
	output  string
}

// runAll tests every mutant of pkg, c.par at a time.
func (c *config) runAll(ctx context.Context, pkg string, ms []Mutant, tmp string) []result {
	results := make([]result, len(ms))
	srcs := map[string][]byte{}
	for _, m := range ms {
		if _, ok := srcs[m.File]; !ok {
			b, err := os.ReadFile(filepath.Join(c.root, m.File))
			if err != nil {
				results[0] = result{outcome: unviable, output: err.Error()}
				return results
			}
			srcs[m.File] = b
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next, done := 0, 0
	for w := range c.par {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(ms) || ctx.Err() != nil {
					return
				}
				m := &ms[i]
				dir := filepath.Join(tmp, fmt.Sprint("w", w))
				r, err := c.testMutant(ctx, pkg, m, srcs[m.File], dir)
				if err != nil {
					r = result{outcome: unviable, output: err.Error()}
				}
				results[i] = r
				mu.Lock()
				done++
				fmt.Fprintf(c.progress, "mutants: %s [%d/%d] %s:%d:%d %s: %s %s\n", pkg, done, len(ms), m.File, m.Pos.Line, m.Pos.Column, m.Kind, r.outcome, r.by)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return results
}

// testMutant writes m's mutated file and an overlay naming it in dir, and
// tests pkg with it.
func (c *config) testMutant(ctx context.Context, pkg string, m *Mutant, src []byte, dir string) (result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, err
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(mutated, m.Apply(src), 0o644); err != nil {
		return result{}, err
	}
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(c.root, m.File): mutated}})
	if err != nil {
		return result{}, err
	}
	overlay := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return result{}, err
	}
	return c.test(ctx, pkg, overlay), nil
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// test runs pkg's tests, with overlay unless it is "".
func (c *config) test(ctx context.Context, pkg, overlay string) result {
	args := []string{"test", "-count=1", "-failfast", "-vet=off", "-timeout", c.timeout.String()}
	if c.run != "" {
		args = append(args, "-run", c.run)
	}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, "./"+pkg)
	// A test binary that ignores its own -timeout (a deadlock in a
	// goroutine's cleanup) is stopped a minute later.
	tctx, cancel := context.WithTimeout(ctx, c.timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(tctx, "go", args...)
	cmd.Dir = c.root
	cmd.WaitDelay = 10 * time.Second
	b, err := cmd.CombinedOutput()
	out := string(b)
	switch {
	case err == nil:
		return result{outcome: survived, output: out}
	case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
		return result{outcome: unviable, output: out}
	case tctx.Err() != nil || strings.Contains(out, "panic: test timed out"):
		return result{outcome: killed, by: "timeout", output: out}
	}
	by := "the test binary"
	if f := failLine.FindStringSubmatch(out); f != nil {
		by = f[1]
	}
	return result{outcome: killed, by: by, output: out}
}

// readEquivalents reads the equivalents file: one key per line, blank
// lines and lines starting with '#' ignored.
func readEquivalents(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			keys[l] = true
		}
	}
	return keys, sc.Err()
}

// fileStats are one file's counts.
type fileStats struct {
	mutants, killed, survived, equivalent, unviable int
}

// rate is the kill rate in percent over the non-equivalent mutants that
// compiled; 100 when there is none.
func (s fileStats) rate() float64 {
	if n := s.killed + s.survived; n > 0 {
		return 100 * float64(s.killed) / float64(n)
	}
	return 100
}

// report prints pkg's table, survivors and equivalents, and returns the
// package's kill rate.
func report(out io.Writer, pkg string, c *config, ms []Mutant, rs []result, equiv map[string]bool) float64 {
	files := map[string]*fileStats{}
	var order []string
	var total fileStats
	var survivors, equivalents []int
	for i, m := range ms {
		s := files[m.File]
		if s == nil {
			s = &fileStats{}
			files[m.File] = s
			order = append(order, m.File)
		}
		s.mutants++
		total.mutants++
		switch {
		case rs[i].outcome == unviable:
			s.unviable++
			total.unviable++
		case rs[i].outcome == survived && equiv[m.Key()]:
			s.equivalent++
			total.equivalent++
			equivalents = append(equivalents, i)
		case rs[i].outcome == survived:
			s.survived++
			total.survived++
			survivors = append(survivors, i)
		default:
			s.killed++
			total.killed++
		}
	}
	run := ""
	if c.run != "" {
		run = fmt.Sprintf(" -run '%s'", c.run)
	}
	fmt.Fprintf(out, "\n== %s: go test -count=1 -failfast -vet=off -timeout %v%s ./%s, each mutant through -overlay\n", pkg, c.timeout, run, pkg)
	if c.sample > 0 {
		fmt.Fprintf(out, "   (a sample of at most %d mutants, -seed %d)\n", c.sample, c.seed)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\tmutants\tkilled\tsurvived\tequivalent\tunviable\tkill rate\t")
	row := func(name string, s fileStats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f%%\t\n", name, s.mutants, s.killed, s.survived, s.equivalent, s.unviable, s.rate())
	}
	slices.Sort(order)
	for _, f := range order {
		row(f, *files[f])
	}
	row("total", total)
	tw.Flush()
	src := map[string][]byte{}
	show := func(i int) {
		m := &ms[i]
		fmt.Fprintf(out, "%s:%d:%d: %s in %s\n    key: %s\n", m.File, m.Pos.Line, m.Pos.Column, m.Kind, m.Func, m.Key())
		b, ok := src[m.File]
		if !ok {
			b, _ = os.ReadFile(filepath.Join(c.root, m.File))
			src[m.File] = b
		}
		if b != nil {
			fmt.Fprint(out, indent(diff(b, m), "    "))
		}
	}
	if len(survivors) > 0 {
		fmt.Fprintf(out, "survivors (%d):\n", len(survivors))
		for _, i := range survivors {
			show(i)
		}
	}
	if len(equivalents) > 0 {
		fmt.Fprintf(out, "known equivalent, not counted (%d, listed in %s):\n", len(equivalents), c.equiv)
		for _, i := range equivalents {
			show(i)
		}
	}
	return total.rate()
}

// diff shows the lines m changes, before (-) and after (+).
func diff(src []byte, m *Mutant) string {
	ls := bytes.LastIndexByte(src[:m.Start], '\n') + 1
	le := m.End + bytes.IndexByte(src[m.End:], '\n')
	if le < m.End {
		le = len(src)
	}
	before := string(src[ls:le])
	after := string(src[ls:m.Start]) + m.Repl + string(src[m.End:le])
	var b strings.Builder
	for l := range strings.SplitSeq(before, "\n") {
		fmt.Fprintf(&b, "-%s\n", l)
	}
	if strings.TrimSpace(after) == "" {
		return b.String()
	}
	for l := range strings.SplitSeq(after, "\n") {
		fmt.Fprintf(&b, "+%s\n", l)
	}
	return b.String()
}

func indent(s, pre string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(strings.TrimSuffix(s, "\n"), "\n") {
		b.WriteString(pre + l + "\n")
	}
	return b.String()
}
