package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// registry is every backend the command offers, in the order help lists
// them. Everything the command knows of a backend is its descriptor, in
// backend_NAME.go: the shared code below only iterates over this list.
var registry = []*backendDesc{&etcdBackend, &dynamodbBackend, &cloudflarekvBackend, &redisBackend, &postgresBackend, &mysqlBackend, &sqliteBackend, &natsBackend, &memoryBackend}

// A backendDesc is one backend as the command sees it.
type backendDesc struct {
	// name is --backend's value; title is how prose names the store, and
	// about follows the name in help's list of backends.
	name, title, about string
	flags              []connFlag
	// usage shows the connection flags by example, for help's table.
	usage string
	// envHelp is what help says of the variables its SDK reads itself
	// (libpq's, the AWS SDK's) or of a credential that has no flag;
	// secretEnv are variables that hold a credential whole: never shown.
	envHelp   string
	secretEnv []string
	open      func(ctx context.Context, f *backendFlags) (*conn, error)
	// create makes what its store needs (init), or is nil: then init says
	// noTable ("NAME needs no table: nothing to create" if empty). script
	// is what create would run (init --print; an error is NAME-table's);
	// creates and prints say what they make and show, for init's help.
	create          func(ctx context.Context, f *backendFlags) (initOutput, error)
	script          func(f *backendFlags) (string, error)
	noTable         string
	creates, prints string
	// example is its connection flags as one typical command line gives
	// them, and exampleEnv what that line sets first (a region, a token, a
	// data source name best kept out of ps): each command's examples show
	// them. examples are its own lines of a command's examples, by command
	// name, where they show something those do not.
	example, exampleEnv string
	examples            map[string]string
	// wipes says which changes behind the adapters' back the feed a mirror
	// follows cannot see (docs/backends.md has the operator's contract);
	// leftBehind, how long what check could not remove stays (empty: it
	// expires by itself).
	wipes, leftBehind string
}

// A connFlag is one of a backend's connection flags.
type connFlag struct {
	name, env, usage, value string
	// boolean takes no value (boolString); a secret's value may carry a
	// credential, which no output shows (commandSecrets); a file is a PEM
	// file (shell completion).
	boolean, secret, file bool
	// need: a required flag. list names the items of a comma-separated
	// flag ("endpoint"). check checks its value, or each item, without
	// touching the network.
	need  bool
	list  string
	check func(f *backendFlags, flag, value string) error
	// tls is set on the URL flag of a backend with TLS file flags
	// (tlsFileFlags).
	tls *tlsFiles
}

// tls is its TLS file flags (tlsFileFlags), or nil.
func (d *backendDesc) tls() *tlsFiles {
	for _, c := range d.flags {
		if c.tls != nil {
			return c.tls
		}
	}
	return nil
}

// noTableSays is what init says of a backend that needs nothing created.
func (d *backendDesc) noTableSays() string {
	return cmp.Or(d.noTable, d.name+" needs no table: nothing to create")
}

// titles joins the titles of the descriptors keep accepts: "A, B and C".
func titles(keep func(*backendDesc) bool) string {
	var ts []string
	for _, d := range registry {
		if keep(d) {
			ts = append(ts, d.title)
		}
	}
	return joinAnd(ts)
}

// examples is command cmd's examples: a line for each backend (for init,
// each with a table to create) giving its example connection and then the
// next of ends, the command's own arguments, in turn; after it, the
// backend's own lines. A line over 96 columns goes on after --backend.
func examples(cmd string, ends ...string) string {
	var out []string
	for i, d := range slices.DeleteFunc(slices.Clone(registry), func(d *backendDesc) bool { return cmd == "init" && d.create == nil }) {
		head := strings.TrimSpace(d.exampleEnv + " kvbreaker " + cmd + " --backend " + d.name)
		line, tail := head, strings.TrimSpace(d.example+" "+ends[i%len(ends)])
		if line += " " + tail; len(line) > 96 {
			line = head + " \\\n      " + tail
		}
		out = append(out, "  "+strings.TrimSpace(line))
		if e := d.examples[cmd]; e != "" {
			out = append(out, e)
		}
	}
	return strings.Join(out, "\n")
}

// backendFlags are the connection flags check, list, inspect and reset
// share. Each can also come from an environment variable; a flag given on
// the command line wins.
type backendFlags struct {
	backend string
	prefix  string

	// clockSkew is the fleet's clock-skew bound, passed to stores that pad
	// by it (cloudflarekv) and to the Breakers the commands make.
	clockSkew time.Duration

	// envFlags holds every flag's variable; values are the backends'
	// connection flags by name.
	envFlags
	values map[string]*string
	// desc is the chosen backend's, once validated.
	desc *backendDesc

	// bound says what bounds connecting, for messages ("--timeout 3s").
	bound string
	// print is init --print's: of the required flags it reads only the
	// table's (NAME-table).
	print bool
}

// get is the value of a backend's connection flag.
func (f *backendFlags) get(flag string) string {
	if p := f.values[flag]; p != nil {
		return *p
	}
	return ""
}

// register adds the connection flags to fs.
func (f *backendFlags) register(fs *pflag.FlagSet) {
	// The flags every backend shares, then each backend's.
	f.fs, f.values = fs, map[string]*string{}
	fs.StringVar(&f.backend, "backend", "", f.withEnv("backend", "KVBREAKER_BACKEND", "the store: "+strings.Join(publicBackends, ", ")+" (required)"))
	fs.StringVar(&f.prefix, "prefix", "", f.withEnv("prefix", "KVBREAKER_PREFIX", "key prefix your fleet's Breakers use (kvbreaker.Prefixed); default none"))
	fs.DurationVar(&f.clockSkew, "clock-skew", kvbreaker.Settings{}.WithDefaults().ClockSkew, f.withEnv("clock-skew", "KVBREAKER_CLOCK_SKEW", "the fleet's clock-skew bound (Settings.ClockSkew)"))
	for _, d := range registry {
		for _, c := range d.flags {
			p := new(string)
			f.values[c.name] = p
			if c.boolean {
				fs.Var(boolString{p}, c.name, f.withEnv(c.name, c.env, c.usage))
				fs.Lookup(c.name).NoOptDefVal = "true"
				continue
			}
			fs.StringVar(p, c.name, c.value, f.withEnv(c.name, c.env, c.usage))
			if c.file {
				_ = cobra.MarkFlagFilename(fs, c.name, "pem", "crt", "key")
			}
		}
	}
}

// backendFlagsHelp is the part of a command's --help that shows each
// backend's flags by example, and the environment.
var backendFlagsHelp = flagsHelp()

// flagsHelp builds backendFlagsHelp in one pass over the registry: the
// backends' names and usage, the variables that hold a credential, the
// flags' variables (a backend's on a line of their own, or a few) and
// what the backends say of their SDKs' variables.
func flagsHelp() string {
	var names, secretEnv []string
	var usage, env, sdkEnv strings.Builder
	for _, d := range registry {
		names = append(names, strings.TrimSpace(d.name+" "+d.about))
		fmt.Fprintf(&usage, "  %-13s %s\n", d.name, strings.ReplaceAll(d.usage, "\n", "\n"+strings.Repeat(" ", 16)))
		for _, e := range d.secretEnv {
			secretEnv = append(secretEnv, "$"+e)
		}
		var envs []string
		for _, c := range d.flags {
			envs = append(envs, c.env)
		}
		for line := range strings.Lines(wrap(strings.Join(envs, ", "), 98)) {
			if line = strings.TrimSpace(line); line != "" {
				env.WriteString("  " + line + "\n")
			}
		}
		sdkEnv.WriteString(d.envHelp)
	}
	return wrap("Backends (--backend): "+joinAnd(names)+". Their connection flags (the same for check, list, inspect, reset and init):", 92) +
		usage.String() +
		wrap(titles(func(d *backendDesc) bool { return d.create != nil })+` need a table: "kvbreaker init" with the same flags creates it ("kvbreaker init --print" shows the SQL or AWS CLI commands).`, 80) +
		"--prefix must be the key prefix your fleet's Breakers use (kvbreaker.Prefixed).\n" +
		wrap("No output or error shows a credential: URLs are shown without user information or password=/token= values, keyword/value strings without password=, a data source name not at all, and "+joinAnd(secretEnv)+" never.", 80) +
		`An unreachable endpoint is reported within about 2 s; one that accepts but
never answers, within --timeout.

Environment (a flag given on the command line wins):
  KVBREAKER_BACKEND, KVBREAKER_PREFIX, KVBREAKER_CLOCK_SKEW
` + env.String() + sdkEnv.String()
}

// A conn is an open connection to one deployment's store.
type conn struct {
	// describe names the deployment without credentials, for output.
	describe string
	// store is the backend's store, without prefix: the commands wrap it
	// with kvbreaker.Prefixed.
	store driver.Store
	// backend is the descriptor open opened it by.
	backend *backendDesc
	// advance, when set, moves the backend's clock (test servers only).
	advance func(ctx context.Context, d time.Duration) error
	// clockShift moves this machine's clock as check's clock measurement
	// reads it (tests only: an offset of a known size without changing a
	// server's clock).
	clockShift time.Duration
}

// closeTimeout bounds sending queued writes when a command ends.
const closeTimeout = 30 * time.Second

// close sends what the store has queued (a failure a Breaker recorded, a
// reset) and releases its connections.
func (c *conn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if f, ok := c.store.(driver.Flusher); ok {
		_ = f.Flush(ctx)
	}
	if cl, ok := c.store.(io.Closer); ok {
		_ = cl.Close()
	}
}

// backends are the descriptors by --backend name: the registry's, and
// the variants tests add (a descriptor's copy with another opener, not in
// help). publicBackends are the registry's names, which help and
// completion offer.
var backends, publicBackends = func() (map[string]*backendDesc, []string) {
	m, names := map[string]*backendDesc{}, []string{}
	for _, d := range registry {
		m[d.name] = d
		names = append(names, d.name)
	}
	return m, slices.Sorted(slices.Values(names))
}()

// validate checks the flags for the chosen backend without touching the
// network: a missing or misplaced flag is a usage error. A value from the
// environment for another backend is ignored, not an error: one shell may
// export several backends' settings.
func (f *backendFlags) validate() error {
	if f.backend == "" {
		return usagef("--backend is required (or $KVBREAKER_BACKEND): one of %s", strings.Join(publicBackends, ", "))
	}
	if f.desc = backends[f.backend]; f.desc == nil {
		return usagef("%s is %q: want one of %s", f.name("backend"), f.backend, strings.Join(publicBackends, ", "))
	}
	if f.clockSkew < 0 {
		return usagef("%s is %v: want zero or more", f.name("clock-skew"), f.clockSkew)
	}
	for _, d := range registry {
		for _, c := range d.flags {
			// A flag with a default (a table's name) is harmless elsewhere.
			if f.get(c.name) == "" || c.value != "" || d.name == f.desc.name {
				continue
			}
			if _, env := f.fromEnv[c.name]; env {
				*f.values[c.name] = ""
				continue
			}
			return usagef("--%s is a %s flag, but --backend is %s", c.name, d.name, f.backend)
		}
	}
	if err := f.checkFlags(f.desc.flags); err != nil {
		return err
	}
	if f.prefix != "" {
		if _, err := kvbreaker.Prefixed(memory.New(), f.prefix); err != nil {
			return usagef("%s: %v", f.name("prefix"), err)
		}
	}
	return nil
}

// checkFlags checks flags' values (need, list, check) without touching
// the network.
func (f *backendFlags) checkFlags(flags []connFlag) error {
	for _, c := range flags {
		v := f.get(c.name)
		items := []string{v}
		if c.list != "" {
			items = f.list(c.name)
		}
		switch {
		case v == "" && c.need && (!f.print || c.name == f.desc.name+"-table"):
			return usagef("--backend %s needs --%s (or $%s)", f.backend, c.name, f.env(c.name))
		case len(items) == 0 && v != "":
			return usagef("%s has no %s", f.name(c.name), c.list)
		case v == "" || c.check == nil:
			continue
		}
		for _, it := range items {
			if err := c.check(f, c.name, it); err != nil {
				return err
			}
		}
	}
	return nil
}

// list is a comma-separated flag's items.
func (f *backendFlags) list(flag string) []string {
	var items []string
	for it := range strings.SplitSeq(f.get(flag), ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	return items
}

// checkWith is the check of a flag whose module checks its value: the
// message shows the value as shown does (redactURL, redactDSN), or not at
// all (nil).
func checkWith(check func(string) error, shown func(string) string) func(*backendFlags, string, string) error {
	return func(f *backendFlags, flag, v string) error {
		switch err := check(v); {
		case err == nil:
			return nil
		case shown == nil:
			return usagef("%s (not shown): %v", f.name(flag), err)
		default:
			return usagef("%s is %q: %v", f.name(flag), shown(v), err)
		}
	}
}

// tableCheck is the check of a table flag, by its backend's Schema.
func tableCheck(schema func(table string) (string, error)) func(*backendFlags, string, string) error {
	return func(f *backendFlags, flag, table string) error {
		if _, err := schema(table); err != nil {
			return usagef("%s: %v", f.name(flag), err)
		}
		return nil
	}
}

// maxConnect bounds connecting when --timeout is longer (check's --timeout
// bounds a whole run of minutes).
const maxConnect = 30 * time.Second

// open validates f and connects, within timeout (or maxConnect if shorter).
// Errors other than *usageError are connection failures (exit 1); a server
// that cannot be reached is a *driver.UnreachableError.
func (f *backendFlags) open(ctx context.Context, timeout time.Duration) (*conn, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	bound := min(timeout, maxConnect)
	f.bound = fmt.Sprintf("--timeout %v", timeout)
	if bound < timeout {
		f.bound = fmt.Sprintf("%v (the connection's bound; --timeout %v bounds the whole run)", bound, timeout)
	}
	octx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	c, err := f.desc.open(octx, f)
	te, isTLS := errors.AsType[*tlsdiag.Error](err)
	switch {
	case err == nil:
		c.backend = f.desc
		return c, nil
	case errors.Is(err, adapter.ErrNoTable):
		// Every module's missing table matches it: say how to create it.
		return nil, fmt.Errorf("%w: %s", err, createHint)
	case isTLS:
		return nil, tlsFlagError(f, te)
	}
	return nil, noAnswer(octx, f.backend, f.bound, err)
}

// opened is the conn of store s, which names its deployment (String), or
// the error of the open that made it.
func opened[S interface {
	driver.Store
	fmt.Stringer
}](s S, err error) (*conn, error) {
	if err != nil {
		return nil, err
	}
	return &conn{describe: s.String(), store: s}, nil
}

// loadTLS builds a TLS configuration from the backend's CA, certificate
// and key files (its tlsFileFlags: tlsdiag.LoadFiles), or nil if none is
// given.
func loadTLS(f *backendFlags) (*tls.Config, error) {
	t := f.desc.tls()
	cfg, err := tlsdiag.LoadFiles(f.get(t.ca), f.get(t.cert), f.get(t.key))
	if fe, ok := errors.AsType[*tlsdiag.FileError](err); ok {
		flag := f.name(t.ca)
		if fe.ClientCert {
			flag = "--" + t.cert + "/--" + t.key
		}
		return nil, fmt.Errorf("%s: %s: %w", f.desc.name, flag, err)
	}
	return cfg, err
}

// tableScript is the script of a backend whose module gives the one that
// makes the table its NAME-table flag names.
func tableScript(script func(table string) (string, error)) func(*backendFlags) (string, error) {
	return func(f *backendFlags) (string, error) { return script(f.get(f.desc.name + "-table")) }
}

// prepared is init's output once a module's Prepare made target's table
// ready (p says what it found or did), or Prepare's error in the
// command's words: the store cannot read the table (ErrForeignTable), the
// module's explain of a refusal, or no answer.
func prepared(ctx context.Context, f *backendFlags, target string, p fmt.Stringer, existed bool, err error, explain func(error) error) (initOutput, error) {
	switch {
	case errors.Is(err, adapter.ErrForeignTable):
		return initOutput{}, fmt.Errorf("%s: the store cannot read it (is it another program's table? see \"kvbreaker init --print\" for the one it needs): %w", target, explain(err))
	case err != nil:
		return initOutput{}, noAnswer(ctx, f.backend, f.bound, explain(err))
	}
	return initOutput{Backend: f.backend, Target: target, Table: f.get(f.desc.name + "-table"), Created: !existed, Message: target + ": " + p.String()}, nil
}

// printHint names init --print's output for a CreateDeniedError's Script.
func printHint(f *backendFlags) string {
	table := f.desc.name + "-table"
	return fmt.Sprintf(`what "kvbreaker init --backend %s --%s %s --print" shows`, f.backend, table, f.get(table))
}

// createHint is how an error about a missing table says to create it.
const createHint = `create it with "kvbreaker init" and the same flags, or run what "kvbreaker init --print" shows`
