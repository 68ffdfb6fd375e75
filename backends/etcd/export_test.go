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

// FleetBeatCounts returns what this process's feeds on demand did for the
// fleet: beats put, lease grants, beats dropped as dated after their
// arrival, and followers that fell back to beating for themselves.
func FleetBeatCounts() (puts, grants, rejected, fallbacks int) {
	return int(beatCounts.put.Load()), int(beatCounts.grants.Load()),
		int(beatCounts.rejected.Load()), int(beatCounts.fallbacks.Load())
}

// IgnoreOthersBeats makes every feed date no beat by another's chain
// until the test ends: the negative control of the fleet's sharing.
func IgnoreOthersBeats(t interface{ Cleanup(func()) }) {
	ignoreOthersBeats.Store(true)
	t.Cleanup(func() { ignoreOthersBeats.Store(false) })
}

// SkewBeatDelta adds d to every beat's elapsed time as it is dated, as a
// sender's fast clock would, and with accept set delivers a beat whatever
// instant it dates to, until the test ends.
func SkewBeatDelta(t interface{ Cleanup(func()) }, d time.Duration, accept bool) {
	beatDeltaSkew.Store(int64(d))
	acceptLateBeats.Store(accept)
	t.Cleanup(func() { beatDeltaSkew.Store(0); acceptLateBeats.Store(false) })
}

// NoFallback makes a feed refused the beat's put go on trying it, until
// the test ends: the negative control of the fallback.
func NoFallback(t interface{ Cleanup(func()) }) {
	noFallback.Store(true)
	t.Cleanup(func() { noFallback.Store(false) })
}

// BeatSuffix is what a prefix's beat key appends to it.
const BeatSuffix = beatSuffix

// BeatLag is how long before its arrival the feeds dated another's beat,
// on average over every beat so dated.
func BeatLag() time.Duration {
	return time.Duration(beatCounts.lag.Load() / max(1, beatCounts.lagN.Load()))
}

// ConnectTimeout is the connection timeout Dial uses, for the tests that
// bound a refused or silent dial by it.
const ConnectTimeout = connectTimeout
