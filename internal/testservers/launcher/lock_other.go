//go:build !unix

package launcher

// lockFile is a no-op where flock is unavailable: only concurrent first
// installs race.
func lockFile(string) (func(), error) { return func() {}, nil }
