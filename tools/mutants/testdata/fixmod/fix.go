// Package fixmod is the mutants tool's test fixture: tests that kill some
// mutants and let others live.
package fixmod

import "errors"

var errNeg = errors.New("negative")

// Clamp returns v limited to [0, hi], and an error for a negative v.
func Clamp(v, hi int) (int, error) {
	if v < 0 {
		return 0, errNeg
	}
	if v > hi {
		return hi, nil
	}
	return v, nil
}

// Last returns the last of three.
func Last() int {
	a := [3]int{4, 5, 6}
	return a[2]
}
