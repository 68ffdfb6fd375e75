package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kvbreaker/kvbreaker/skew"
)

// maxNamedOutside bounds the lines of the command's product code, outside
// a backend's own files, that name the backend: its name, how prose names
// it, or one of its flags. Above it, code that belongs in the backend's
// descriptor has leaked into the shared files, or a file lists backends.
const maxNamedOutside = 5

// backendCodeFiles are the command's product files that hold backend code:
// the registry and its flags (backend.go; envflags.go gives any flag its
// variable, the listener's too), each backend's descriptor
// (backend_NAME.go; backend_sql.go, PostgreSQL's and MySQL's shared path),
// reaching a server (reach.go) and explaining a TLS
// failure in flags (tlserr.go).
var backendCodeFiles = []string{"backend*.go", "reach.go", "tlserr.go"}

// maxBackendLines bounds the lines of backendCodeFiles: what a backend
// knows of its store (checking a connection string, explaining a refusal,
// making its table) belongs in the backend's module, where a library user
// gets it too, and the command keeps its flags, help and data.
const maxBackendLines = 1000

// TestBackendCodeLines counts the lines of backendCodeFiles (tests apart).
func TestBackendCodeLines(t *testing.T) {
	total := 0
	var per []string
	for _, pattern := range backendCodeFiles {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			n := strings.Count(string(b), "\n")
			total += n
			per = append(per, file+": "+strconv.Itoa(n))
		}
	}
	// A glob that matches nothing would pass any bound.
	if total < 500 {
		t.Fatalf("backend code counted %d lines in %v: the files have moved, update backendCodeFiles", total, per)
	}
	if total > maxBackendLines {
		t.Errorf("cmd/kvbreaker's backend code is %d lines, want at most %d:\n%s", total, maxBackendLines, strings.Join(per, "\n"))
	} else {
		t.Logf("backend code: %d lines (at most %d)", total, maxBackendLines)
	}
}

// TestBackendNamedOnlyInItsFile counts, for each backend, the lines of
// package main's product files (not tests) other than backend_NAME*.go that
// name it. simulate.go is left out: it names the simulator's models of a
// store's feed, not a backend the command connects to.
func TestBackendNamedOnlyInItsFile(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	src := map[string][]string{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || file == "simulate.go" {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src[file] = strings.Split(strings.ToLower(string(b)), "\n")
	}
	for _, name := range publicBackends {
		terms := namesOf(name)
		var hits []string
		for file, lines := range src {
			if file == "backend_"+name+".go" || strings.HasPrefix(file, "backend_"+name+"_") {
				continue
			}
			for i, line := range lines {
				if slices.ContainsFunc(terms, func(term string) bool { return strings.Contains(line, term) }) {
					hits = append(hits, file+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
				}
			}
		}
		slices.Sort(hits)
		if len(hits) > maxNamedOutside {
			t.Errorf("%s (as %q) is named on %d lines outside backend_%s.go, want at most %d:\n%s",
				name, terms, len(hits), name, maxNamedOutside, strings.Join(hits, "\n"))
		} else {
			t.Logf("%s: %d line(s) outside backend_%s.go", name, len(hits), name)
		}
	}
}

// TestRegistryMatchesProfilesAndDocs: skew's profiles and docs/backends.md's
// table of backends name the backends of the registry, no more and no
// fewer. A profile is named as the backend or as its title in one word
// ("workerskv" for Workers KV).
func TestRegistryMatchesProfilesAndDocs(t *testing.T) {
	var names []string
	for _, d := range registry {
		names = append(names, d.name)
	}
	slices.Sort(names)

	var profiled []string
	for _, p := range skew.Profiles() {
		i := slices.IndexFunc(registry, func(d *backendDesc) bool {
			return p.Name == d.name || p.Name == strings.ToLower(strings.ReplaceAll(d.title, " ", ""))
		})
		if i < 0 {
			t.Errorf("skew profile %q is no backend of the command's registry", p.Name)
			continue
		}
		profiled = append(profiled, registry[i].name)
	}
	slices.Sort(profiled)
	if !slices.Equal(profiled, names) {
		t.Errorf("skew.Profiles() covers %v, the registry %v", profiled, names)
	}

	b, err := os.ReadFile("../../docs/backends.md")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile(`(?m)^\| backend \| package \|.*\n(?:\|.*\n)+`).FindString(string(b))
	if table == "" {
		t.Fatal(`docs/backends.md has no table headed "| backend | package |"`)
	}
	var documented []string
	for _, m := range regexp.MustCompile("`backends/([a-z0-9]+)`").FindAllStringSubmatch(table, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	if !slices.Equal(documented, names) {
		t.Errorf("docs/backends.md's table of backends lists %v, the registry %v", documented, names)
	}
}

// TestConnTakesItsBackendsTexts: a conn open made has its backend's
// leftBehind and wipes: DynamoDB's items wait for its TTL deletion, etcd's feed sees
// a compaction as Lost, SQLite's rows stay until a purge, and memory's
// records expire by themselves (no text, the control).
func TestConnTakesItsBackendsTexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	if code, _, errOut := runT(t, "init", "--backend", "sqlite", "--sqlite-path", path); code != exitOK {
		t.Fatalf("init: exit %d, stderr %q", code, errOut)
	}
	for _, tc := range []struct{ backend, leftBehind, wipes string }{
		{"dynamodb", "DynamoDB's TTL deletion", ""},
		{"etcd", "", "a compaction past a watch"},
		{"sqlite", "sqlite.Store.Purge", "kvbreaker_deleted"},
		{"memory", "", ""},
	} {
		var bf backendFlags
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		bf.register(fs)
		args := connArgs(tc.backend)
		if tc.backend == "sqlite" {
			args = append(args, "--sqlite-path", path)
		}
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		c, err := bf.open(t.Context(), time.Minute)
		if err != nil {
			t.Fatalf("%s: %v", tc.backend, err)
		}
		c.close()
		if got := c.backend.leftBehind; (tc.leftBehind == "") != (got == "") || !strings.Contains(got, tc.leftBehind) {
			t.Errorf("%s: leftBehind %q, want %q", tc.backend, got, tc.leftBehind)
		}
		if got := c.backend.wipes; (tc.wipes == "") != (got == "") || !strings.Contains(got, tc.wipes) {
			t.Errorf("%s: wipes %q, want %q", tc.backend, got, tc.wipes)
		}
	}
}
