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
// PostgreSQL's NOTIFY, delivered as driver.ChangeStale): a process reads a
// key the feed said changed when it is next asked about it, one read per
// key, per process, per run of changes between two questions (its own
// writes included: their invalidation arrives too). On etcd and the
// memory store the feed carries the values and these reads are not made.
// FeedReadsOwn, part of FeedReads, are those after changes that were all
// the process's own writes (or the record a lost compare-and-swap
// returned): a feed whose changes named the version written would let a
// mirror that holds that version skip them.
//
// LostWrites, part of Writes, are the compare-and-swaps and
// compare-and-deletes that changed nothing: a conflict, or a delete of a
// record already gone.
type Cost struct {
	Reads        int
	Writes       int
	LeaseGrants  int
	FeedReads    int
	FeedReadsOwn int
	LostWrites   int
}

// Requests is Reads plus Writes.
func (c Cost) Requests() int { return c.Reads + c.Writes }

// Add returns c plus d.
func (c Cost) Add(d Cost) Cost {
	return Cost{Reads: c.Reads + d.Reads, Writes: c.Writes + d.Writes, LeaseGrants: c.LeaseGrants + d.LeaseGrants,
		FeedReads: c.FeedReads + d.FeedReads, FeedReadsOwn: c.FeedReadsOwn + d.FeedReadsOwn, LostWrites: c.LostWrites + d.LostWrites}
}

// Coster is a model that counts its store requests.
type Coster interface {
	Cost() Cost
}
