package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeNamesEveryCommand: the README's install line lists the
// command's subcommands, all of them.
func TestReadmeNamesEveryCommand(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatalf("%v (the test runs in the repository)", err)
	}
	m := regexp.MustCompile(`# the command: ([a-z, ]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`README.md has no "# the command: …" list: update this test`)
	}
	listed := strings.Split(string(m[1]), ", ")
	var have []string
	for _, c := range newRoot(func() {}).Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			have = append(have, c.Name())
		}
	}
	slices.Sort(listed)
	slices.Sort(have)
	if !slices.Equal(listed, have) {
		t.Errorf("README.md lists the commands %v; the command has %v", listed, have)
	}
}
