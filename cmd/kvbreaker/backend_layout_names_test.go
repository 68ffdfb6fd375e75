package main

import "strings"

// namesOf is how the code names backend name: the name, how prose names
// the store, and its connection flags.
func namesOf(name string) []string {
	d := backends[name]
	terms := []string{strings.ToLower(d.name), strings.ToLower(d.title)}
	for _, c := range d.flags {
		terms = append(terms, c.name)
	}
	return terms
}
