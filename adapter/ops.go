package adapter

// The Op of a *driver.OpError from each method of the contract (driver's
// "Errors" lists them): one spelling for every adapter, so that whoever
// matches on Op (an Observer, a log query) reads the same word from every
// store. An adapter's own calls (a dial, a purge) name their ops itself.
const (
	OpGet    = "get"                // Store.Get
	OpSwap   = "compare-and-swap"   // Store.CompareAndSwap
	OpDelete = "compare-and-delete" // Store.CompareAndDelete
	OpList   = "list"               // Lister.List
	OpExpiry = "expiry"             // ExpiryReader.Expiry
	OpFollow = "follow"             // Follower.Follow, DemandFollower.FollowDemand
	OpClock  = "sample clock"       // ClockSampler.SampleClock
)
