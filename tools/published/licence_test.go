package main

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"

	"github.com/kvbreaker/kvbreaker/tools/internal/modset"
)

// zipOf is a module zip of mv holding files (slash paths in the module).
func zipOf(t *testing.T, mv module.Version, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, text := range files {
		f, err := w.Create(mv.Path + "@" + mv.Version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCheckLicence(t *testing.T) {
	data, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	apache := string(data)
	mit := `Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated documentation files (the "Software"), to deal in the Software without restriction, including without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
`
	mv := module.Version{Path: "github.com/kvbreaker/kvbreaker/backends/redis", Version: "v0.1.0"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // the licence file found, or "" for an error containing fail
		fail  string
	}{
		{"LICENSE", map[string]string{"go.mod": "module x\n", "LICENSE": apache}, "LICENSE", ""},
		{"LICENSE.txt, as aws-sdk-go-v2's", map[string]string{"go.mod": "module x\n", "LICENSE.txt": apache}, "LICENSE.txt", ""},
		{"a name in another case", map[string]string{"go.mod": "module x\n", "License.md": apache}, "License.md", ""},
		{"none", map[string]string{"go.mod": "module x\n", "README.md": "# redis\n"}, "", "no licence file at its root"},
		{"only in a subdirectory", map[string]string{"go.mod": "module x\n", "internal/LICENSE": apache}, "", "no licence file at its root"},
		{"a name pkg.go.dev does not read", map[string]string{"go.mod": "module x\n", "LEGAL": apache, "LICENSE.rtf": apache}, "", "no licence file at its root"},
		{"not a licence text", map[string]string{"go.mod": "module x\n", "LICENSE": "Copyright the kvbreaker authors. All rights reserved.\n"}, "", "not the Apache-2.0 text"},
		{"a truncated text", map[string]string{"go.mod": "module x\n", "LICENSE": apache[:len(apache)/3]}, "", "not the Apache-2.0 text"},
		{"another licence", map[string]string{"go.mod": "module x\n", "LICENSE": mit}, "", "not the Apache-2.0 text"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkLicence(zipOf(t, mv, tc.files), mv)
			if tc.fail == "" {
				if err != nil || got != tc.want {
					t.Fatalf("checkLicence = %q, %v; want %q, nil", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.fail) || !strings.Contains(err.Error(), mv.Path+"@"+mv.Version) {
				t.Fatalf("checkLicence = %q, %v; want an error naming the module and saying %q", got, err, tc.fail)
			}
		})
	}
}

// TestMissingLicenceFails is the licence check's negative control through
// the whole run: a tag of backends/redis without its LICENSE fails the
// check at the proxy step. The repository's root LICENSE goes too: the go
// command (and x/mod/zip.CreateFromVCS) puts it into the zip of a nested
// module that has none of its own.
func TestMissingLicenceFails(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and tags it (-short)")
	}
	for _, kv := range []string{"GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"} {
		t.Setenv(kv, "negative control")
	}
	for _, kv := range []string{"GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"} {
		t.Setenv(kv, "control@kvbreaker.invalid")
	}
	mutated := false
	dropLicence := func(clone string) error {
		for _, f := range []string{filepath.Join(clone, "backends", "redis", "LICENSE"), filepath.Join(clone, "LICENSE")} {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
		for _, args := range [][]string{
			{"commit", "-q", "-am", "backends/redis and the repository without a licence"},
			{"tag", "-f", "-a", "-m", "moved", "backends/redis/v0.1.0"},
		} {
			if _, err := modset.Git(clone, args...); err != nil {
				return err
			}
		}
		mutated = true
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	err := Run(ctx, Config{Repo: "../..", Version: "v0.1.0", Only: []string{"redis"}, Mutate: dropLicence, Log: t.Logf})
	if !mutated {
		t.Fatalf("the check failed before the control could drop the licence: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), repoPath+"/backends/redis@v0.1.0: its zip has no licence file") {
		t.Fatalf("the check over backends/redis without LICENSE: %v; want it to fail naming the module", err)
	}
	t.Logf("the check failed as it must:\n%v", err)
}
