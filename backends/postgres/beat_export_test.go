package postgres

// IgnoreOwnBeatSamples turns off the clock sample a beat of a follower's
// own stands for (the negative control of TestFollowDemandOwnBeatSample).
func IgnoreOwnBeatSamples(on bool) { ignoreOwnBeatSamples.Store(on) }

// DateOwnBeatsAtArrival dates, while on, a follower's own beat at its
// arrival rather than before its statement was sent (the negative control
// of TestFollowDemandOwnBeatDated).
func DateOwnBeatsAtArrival(on bool) { dateOwnBeatsAtArrival.Store(on) }
