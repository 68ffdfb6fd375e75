package skew

import (
	"math/rand/v2"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Profile is a backend's expiry profile: the traits its adapter declares
// (with default options), from which the worst distortion it may inflict
// follows (FromTraits). Build one for any store from its Traits:
//
//	p := skew.Profile{Name: "mykv", Traits: store.Traits()}
//
// The profiles below are built from each backend's exported DefaultTraits:
// Memory by calling memory.DefaultTraits, the others as values, since skew
// (in the root module) cannot import the backends' modules; those whose
// server expires keys declare their values as their DefaultTraits do,
// through adapter.ServerExpiry (adapter.RowTraits for the SQL row
// stores). Each backend's own test checks that its DefaultTraits equal its
// profile here and that a Store with default options declares them, so
// none can drift.
type Profile struct {
	// Name is the backend's name (memory, etcd, dynamodb, workerskv, redis,
	// postgres, mysql, sqlite).
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

// The backends' profiles (DESIGN §3), as their adapters declare them with
// default options.
var (
	// Memory: atomic, exact relative expiry on the store's clock
	// (memory.DefaultTraits).
	Memory = Profile{Name: "memory", Traits: memory.DefaultTraits()}
	// Etcd (etcd.DefaultTraits): leases of whole seconds rounded up, at
	// least the server's default 2 s minimum; the leader checks expiry
	// every 500 ms, and pooled leases may outlive the TTL by up to 60 s.
	Etcd = Profile{Name: "etcd", Traits: adapter.ServerExpiry{Granularity: time.Second, MinTTL: 2 * time.Second,
		Late: 500*time.Millisecond + 60*time.Second}.Traits()}
	// DynamoDB (dynamodb.DefaultTraits): an expiry attribute in epoch
	// seconds (rounded up), filtered on read by the reader's clock, with
	// consistent reads; the physical copy is purged an hour after the
	// logical expiry, which bounds the fleet's clock skew.
	DynamoDB = Profile{Name: "dynamodb", Traits: driver.Traits{
		Atomic:             true,
		Expiry:             driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered, Granularity: time.Second, Late: time.Second},
		MaxClockSkew:       time.Hour,
		MaxClockSkewOption: "dynamodb.WithPurgeDelay",
	}}
	// WorkersKV (cloudflarekv.DefaultTraits): last writer wins; the exact
	// expiry (to the millisecond) in metadata, filtered on read, so what a
	// reader sees has no minimum TTL; the physical copy (expiration_ttl of
	// at least 60 s, padded by 2δ + 1 s, δ = kvbreaker's default ClockSkew)
	// may outlive it by up to 60 s + 2δ + 2 s; reads up to 60 s
	// (propagation) + 10 s (the adapter's cache) stale; one write per
	// second per key.
	WorkersKV = Profile{Name: "workerskv", Traits: driver.Traits{
		Atomic: false,
		Expiry: driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered, Granularity: time.Millisecond,
			Late: 60*time.Second + 2*kvbreaker.Settings{}.WithDefaults().ClockSkew + 2*time.Second},
		ReadStaleness:      70 * time.Second,
		MinWriteInterval:   time.Second,
		MaxClockSkew:       kvbreaker.Settings{}.WithDefaults().ClockSkew,
		MaxClockSkewOption: "cloudflarekv.WithClockSkew",
	}}
	// Redis (redis.DefaultTraits): PEXPIRE in milliseconds on every write,
	// judged by the server's clock, so a key lives through the millisecond
	// its TTL ends in.
	Redis = Profile{Name: "redis", Traits: adapter.ServerExpiry{Granularity: time.Millisecond, Late: time.Millisecond}.Traits()}
	// PostgreSQL (postgres.DefaultTraits): expires_at = now() + ttl in the
	// microseconds of timestamptz, judged against now() by every read and
	// condition on the server: never early nor late on its clock.
	PostgreSQL = Profile{Name: "postgres", Traits: adapter.RowTraits()}
	// MySQL (mysql.DefaultTraits): expires_at = UTC_TIMESTAMP(6) + ttl in
	// the microseconds of DATETIME(6), judged against UTC_TIMESTAMP(6) by
	// every read and condition on the server: never early nor late on its
	// clock.
	MySQL = Profile{Name: "mysql", Traits: adapter.RowTraits()}
	// SQLite (sqlite.DefaultTraits): the writer's clock + ttl in Unix
	// nanoseconds, judged by the reader's clock, which on one host is
	// the same clock; the row stays a minute past its expiry (the purge
	// delay), which bounds the fleet's clock skew.
	SQLite = Profile{Name: "sqlite", Traits: driver.Traits{
		Atomic:             true,
		Expiry:             driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered},
		MaxClockSkew:       time.Minute,
		MaxClockSkewOption: "sqlite.WithPurgeDelay",
	}}
	// NATS (nats.DefaultTraits): JetStream's per-message TTL (Nats-TTL) in
	// whole seconds rounded up, at least 1 s, judged by the server's clock
	// in a wheel of 1 s ticks, so a message can outlive its TTL by up to
	// 1.5 s.
	NATS = Profile{Name: "nats", Traits: adapter.ServerExpiry{Granularity: time.Second, MinTTL: time.Second,
		Late: 1500 * time.Millisecond}.Traits()}
)

// Profiles returns the backend profiles.
func Profiles() []Profile {
	return []Profile{Memory, Etcd, DynamoDB, WorkersKV, Redis, PostgreSQL, MySQL, SQLite, NATS}
}
