package model

// Cost counts the store requests a model made: what an operator pays per
// delivery (DynamoDB request units, etcd Raft proposals, Workers KV's REST
// budget). Reads are gets; Writes are puts, deletes and compare-and-swaps,
// failed ones included. LeaseGrants is what etcd would add: kvbreaker's etcd
// adapter attaches each write to a pooled lease, granting a new one only
// when the pooled lease cannot carry the write (see leaseEstimate); it is
// not included in Reads or Writes.
//
// FeedReads, part of Reads, are what a mirror's feed costs on a store that
// pushes invalidations rather than values (Redis's CLIENT TRACKING, and
// PostgreSQL's NOTIFY as kvbreaker's adapter uses it): each change re-read
// by every process that did not make it, and each expiry by every process.
// On etcd and the memory store the feed carries the values and these reads
// are not made. FeedReadsOnUse, not in Reads, is what they would be if a
// process re-read an invalidated key only when next asked about it (and
// decided on the store's record then): one read per key, per process, per
// run of changes between two questions.
type Cost struct {
	Reads          int
	Writes         int
	LeaseGrants    int
	FeedReads      int
	FeedReadsOnUse int
}

// Requests is Reads plus Writes.
func (c Cost) Requests() int { return c.Reads + c.Writes }

// Add returns c plus d.
func (c Cost) Add(d Cost) Cost {
	return Cost{Reads: c.Reads + d.Reads, Writes: c.Writes + d.Writes, LeaseGrants: c.LeaseGrants + d.LeaseGrants,
		FeedReads: c.FeedReads + d.FeedReads, FeedReadsOnUse: c.FeedReadsOnUse + d.FeedReadsOnUse}
}

// Coster is a model that counts its store requests.
type Coster interface {
	Cost() Cost
}
