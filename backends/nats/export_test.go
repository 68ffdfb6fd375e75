package nats

import "time"

// BeatCounts returns how many fleet beats this process's feeds sent, how
// many wipe checks rode on them and how many clock samples they took.
func BeatCounts() (sent, checks, samples int) {
	return int(beatCounts.sent.Load()), int(beatCounts.checks.Load()), int(beatCounts.samples.Load())
}

// BeatUnanswered returns how many of the beats sent ended without the
// server's answer: each may or may not be stored.
func BeatUnanswered() int { return int(beatCounts.unanswered.Load()) }

// BeatRejected returns how many beats this process's feeds dropped as
// dated after their arrival.
func BeatRejected() int { return int(beatCounts.rejected.Load()) }

// IgnoreOthersBeats makes every feed take no Synced from another
// follower's beat (the negative control of the fleet's sharing).
func IgnoreOthersBeats(on bool) { ignoreOthersBeats.Store(on) }

// BeatSubject is the reserved subject of prefix's beats.
func (s *Store) BeatSubject(prefix string) string { return s.beatSubject(prefix) }

// SkewBeats moves every other follower's beat's server time on by d
// before it is converted; AcceptLateBeats delivers a beat dated after its
// arrival (the negative controls of the arrival check).
func SkewBeats(d time.Duration) { beatSkew.Store(int64(d)) }
func AcceptLateBeats(on bool)   { acceptLateBeats.Store(on) }

// BeatSubjectFor is the reserved subject of prefix's beats in bucket.
func BeatSubjectFor(bucket, prefix string) string {
	return (&Store{subjPre: "$KV." + bucket + "."}).beatSubject(prefix)
}

// ConnectTimeout is the connection timeout Dial uses, for the tests that
// bound a refused or silent dial by it.
const ConnectTimeout = connectTimeout

// BeatSeeds returns how many sessions on demand seeded the beat's subject.
func BeatSeeds() int { return int(beatCounts.seeds.Load()) }
