package postgres

// IgnoreOwnBeatSamples turns off the clock sample a beat of a follower's
// own stands for (the negative control of TestFollowDemandOwnBeatSample).
func IgnoreOwnBeatSamples(on bool) { ignoreOwnBeatSamples.Store(on) }
