package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: --version's text for the build information a release, a
// clone (clean and modified) and a build without VCS stamp carry.
func TestVersionOf(t *testing.T) {
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "640c073d383f9a1b2c3d4e5f60718293a4b5c6d7"},
			{Key: "vcs.time", Value: "2026-12-01T13:36:19Z"},
			{Key: "vcs.modified", Value: modified},
		}
	}
	for _, tc := range []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"go install @v0.1.0", "v0.1.0", nil, "v0.1.0 (go1.26.8)"},
		{"clone, (devel)", "(devel)", vcs("false"), "(devel) (commit 640c073d383f 2026-12-01T13:36:19Z, go1.26.8)"},
		{"clone, modified", "(devel)", vcs("true"), "(devel) (commit 640c073d383f-dirty 2026-12-01T13:36:19Z, go1.26.8)"},
		{"clone, empty version", "", vcs("true"), "(devel) (commit 640c073d383f-dirty 2026-12-01T13:36:19Z, go1.26.8)"},
		{"clone, Go's pseudo-version", "v0.0.0-20261201133619-640c073d383f+dirty", vcs("true"), "v0.0.0-20261201133619-640c073d383f+dirty (commit 640c073d383f-dirty 2026-12-01T13:36:19Z, go1.26.8)"},
		{"no VCS stamp", "(devel)", []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}, "(devel) (no VCS revision: go run, -buildvcs=false or no .git directory; go1.26.8)"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kvbreaker/kvbreaker/cmd/kvbreaker", Version: tc.version}, Settings: tc.settings}
		if got := versionOf(bi); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
