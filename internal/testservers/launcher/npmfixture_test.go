package launcher

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir(t *testing.T) {
	t.Setenv("KVB_TEST_DIR", "")
	if d, err := Dir("x", "KVB_TEST_DIR", "/src/internal/x/x.go"); err != nil || d != "/src/internal/x" {
		t.Fatalf("from source: %q %v", d, err)
	}
	if _, err := Dir("x", "KVB_TEST_DIR", "internal/x/x.go"); err == nil || !strings.Contains(err.Error(), "set KVB_TEST_DIR") {
		t.Fatalf("trimpath build: %v, want advice to set the variable", err)
	}
	t.Setenv("KVB_TEST_DIR", "/elsewhere")
	if d, _ := Dir("x", "KVB_TEST_DIR", "internal/x/x.go"); d != "/elsewhere" {
		t.Fatalf("override: %q", d)
	}
}

// TestDirAdviceNamesTheFixture: the advice for a -trimpath build names the
// fixture's directory as it is in this repository, so following it works.
func TestDirAdviceNamesTheFixture(t *testing.T) {
	t.Setenv("KVB_TEST_DIR", "")
	for _, name := range []string{"dynalite", "miniflare"} {
		_, err := Dir(name, "KVB_TEST_DIR", name+"/"+name+".go")
		if err == nil {
			t.Fatalf("%s: a relative source file located a directory", name)
		}
		_, rel, ok := strings.Cut(err.Error(), "set KVB_TEST_DIR to the path of ")
		if !ok {
			t.Fatalf("%s: %v, want advice to set the variable", name, err)
		}
		// This package is internal/testservers/launcher.
		if _, err := os.Stat(filepath.Join("..", "..", "..", filepath.FromSlash(rel), "package.json")); err != nil {
			t.Errorf("%s: the advice names %q, which is not the fixture's directory: %v", name, rel, err)
		}
	}
}

func TestInstallSkipsWhenPresent(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed by the fixtures: install Node.js 20 or later")
	}
	dir, _ := filepath.Abs("../dynalite")
	// dynalite's fixture test installs it; a second Install must be a no-op
	// even without a registry.
	if err := Install(t.Context(), "dynalite", dir, "dynalite"); err != nil {
		t.Fatal(err)
	}
	if err := Install(t.Context(), "empty", t.TempDir(), "nothing"); err == nil {
		t.Fatal("npm ci in a directory without package.json succeeded")
	}
}
