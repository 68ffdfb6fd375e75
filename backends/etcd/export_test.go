package etcd

import "time"

// BeatsSent returns how many beats this process's feeds sent.
func BeatsSent() int { return int(beatsSent.Load()) }

// SetFirstProbeTimeout bounds Dial's first TLS probe by d until the test
// ends.
func SetFirstProbeTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	old := firstProbeTimeout
	firstProbeTimeout = d
	t.Cleanup(func() { firstProbeTimeout = old })
}

// ConnectTimeout is the connection timeout Dial uses, for the tests that
// bound a refused or silent dial by it.
const ConnectTimeout = connectTimeout
