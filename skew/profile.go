package skew

import (
	"math/rand/v2"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Profile is a backend's expiry profile: the traits its adapter declares
// (with default options), from which the worst distortion it may inflict
// follows (FromTraits). skew does not import the backends; instead each
// backend's own test asserts that its Store's Traits() equal its profile's,
// so the two cannot drift apart:
//
//	if got, want := store.Traits(), skew.Etcd.Traits; got != want {
//		t.Fatalf("Traits() = %+v, but skew.Etcd declares %+v: update one of them", got, want)
//	}
type Profile struct {
	// Name is the backend's name (memory, etcd, dynamodb, workerskv).
	Name string
	// Traits are what the backend's Store declares with default options.
	Traits driver.Traits
}

// Distortion is the worst distortion p's traits allow (see FromTraits).
func (p Profile) Distortion(rng *rand.Rand) Distortion { return FromTraits(p.Traits, rng) }

// RequiredMargin is the TTLMargin p needs for a fleet with clock skew δ.
func (p Profile) RequiredMargin(skew time.Duration) time.Duration {
	return p.Traits.Expiry.RequiredMargin(skew)
}

// The four backends' profiles (DESIGN §3), as their adapters declare them
// with default options.
var (
	// Memory: atomic, exact relative expiry on the store's clock.
	Memory = Profile{Name: "memory", Traits: driver.Traits{
		Atomic:    true,
		Expiry:    driver.ExpiryModel{Kind: driver.ExpiryRelative},
		InProcess: true,
	}}
	// Etcd: leases of whole seconds rounded up, at least the server's 2 s
	// minimum; the leader checks expiry every 500 ms, and pooled leases may
	// outlive the TTL by up to 60 s.
	Etcd = Profile{Name: "etcd", Traits: driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{Kind: driver.ExpiryRelative, Granularity: time.Second, MinTTL: 2 * time.Second,
			Late: 500*time.Millisecond + 60*time.Second},
	}}
	// DynamoDB: an expiry attribute in epoch seconds (rounded up), filtered
	// on read by the reader's clock, with consistent reads.
	DynamoDB = Profile{Name: "dynamodb", Traits: driver.Traits{
		Atomic: true,
		Expiry: driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered, Granularity: time.Second, Late: time.Second},
	}}
	// WorkersKV: last writer wins; the exact expiry (to the millisecond) in
	// metadata, filtered on read, so what a reader sees has no minimum TTL;
	// the physical copy (expiration_ttl of at least 60 s, padded by 2δ + 1 s,
	// δ = kvbreaker.DefaultClockSkew) may outlive it by up to 60 s + 2δ + 2 s;
	// reads up to 60 s (propagation) + 10 s (the adapter's cache) stale;
	// one write per second per key.
	WorkersKV = Profile{Name: "workerskv", Traits: driver.Traits{
		Atomic: false,
		Expiry: driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered, Granularity: time.Millisecond,
			Late: 60*time.Second + 2*kvbreaker.DefaultClockSkew + 2*time.Second},
		ReadStaleness:    70 * time.Second,
		MinWriteInterval: time.Second,
	}}
)

// Profiles returns the four backend profiles.
func Profiles() []Profile { return []Profile{Memory, Etcd, DynamoDB, WorkersKV} }
