package main

import "strings"

// namesOf is how the code names backend name: the name itself.
func namesOf(name string) []string { return []string{strings.ToLower(name)} }
