package conformance

import (
	"fmt"
	"slices"
	"strings"
)

// CaseID names a case of the suite. It is the subtest name under Run (go
// test -run TestConformance/expiry) and Problem.Case under Check, and it
// does not change when a case's wording does: match on it, not on text.
type CaseID string

// The suite's cases, in the order they run.
const (
	CaseReachable             CaseID = "reachable"
	CaseTraits                CaseID = "traits"
	CaseGetAbsent             CaseID = "get-absent"
	CaseCreateAndRead         CaseID = "create-and-read"
	CaseVersionsChange        CaseID = "versions-change-on-every-write"
	CaseCreateOnly            CaseID = "create-only"
	CaseStaleVersion          CaseID = "stale-version-conflicts"
	CaseAbsentWithVersion     CaseID = "absent-with-version-conflicts"
	CaseCompareAndDelete      CaseID = "compare-and-delete"
	CaseCompareAndDeleteStale CaseID = "compare-and-delete-stale"
	CaseRecreate              CaseID = "recreate-new-version"
	CaseHostileKeys           CaseID = "hostile-keys"
	CaseContextEnded          CaseID = "context-ended"
	CaseForeign               CaseID = "foreign-value-replaced"
	CaseClockSampler          CaseID = "clock-sampler"
	CaseReadStaleness         CaseID = "read-staleness"
	CaseLinearizable          CaseID = "concurrent-cas-linearizable"
	CaseExpiry                CaseID = "expiry"
	CaseExpiredAbsent         CaseID = "expired-counts-as-absent"
	CaseStateTTL              CaseID = "expiry-at-state-ttl"
	CaseReplaceTTL            CaseID = "every-write-replaces-ttl"
	CaseOffGrid               CaseID = "ttl-off-grid"
	CaseSkewedReader          CaseID = "skewed-reader"
	CaseFleet                 CaseID = "breaker-fleet"
	CaseMargin                CaseID = "margin-keeps-probes"
	CaseLostCAS               CaseID = "lost-answer-cas"
	CaseLostDelete            CaseID = "lost-answer-delete"
	CaseLostBreaker           CaseID = "lost-answer-breaker"
	CaseListPages             CaseID = "list-pages"
	CaseListKeys              CaseID = "list-hostile-keys"
	CaseListExpired           CaseID = "list-expired"
	CaseFollowArgs            CaseID = "follow-arguments"
	CaseFollowSnapshot        CaseID = "follow-snapshot"
	CaseFollowOrder           CaseID = "follow-order"
	CaseFollowStorm           CaseID = "follow-storm"
	CaseFollowHeartbeat       CaseID = "follow-heartbeat"
	CaseFollowExpiry          CaseID = "follow-expiry"
	CaseFollowLost            CaseID = "follow-lost"
	CaseFollowWipe            CaseID = "follow-wipe"
)

// Cases returns every case's ID in the order the suite runs them.
func Cases() []CaseID {
	out := make([]CaseID, len(cases))
	for i, c := range cases {
		out[i] = c.id
	}
	return out
}

// PromiseID names a clause of the store contract (or of the harness's) that
// the suite checks. It is stable; Text says it in words.
//
// A PromiseID is also an error: every problem a run reports wraps the
// promise it breaks, so errors.Is(err, conformance.PromiseExpiredCAS) says
// whether Check's error breaks it. Waive takes one, for the promises a
// harness may be unable to verify.
type PromiseID string

// The promises the suite checks.
const (
	PromiseReachable              PromiseID = "reachable"
	PromiseMakeStore              PromiseID = "harness-makes-stores"
	PromiseNoPanic                PromiseID = "no-panic"
	PromiseTraitsWellFormed       PromiseID = "traits-well-formed"
	PromiseTraitsStable           PromiseID = "traits-stable"
	PromiseGetAbsent              PromiseID = "get-absent-not-found"
	PromiseCreate                 PromiseID = "create"
	PromiseRead                   PromiseID = "read-what-was-written"
	PromiseNewVersion             PromiseID = "new-version-per-write"
	PromiseCreateOnly             PromiseID = "create-only"
	PromiseStaleConflicts         PromiseID = "stale-version-conflicts"
	PromiseAbsentVersionConflicts PromiseID = "absent-with-version-conflicts"
	PromiseConflictValue          PromiseID = "conflict-carries-current"
	PromiseDelete                 PromiseID = "compare-and-delete"
	PromiseDeleteAbsent           PromiseID = "delete-absent-not-found"
	PromiseDeleteStale            PromiseID = "delete-stale-conflicts"
	PromiseNoVersionReuse         PromiseID = "no-version-reuse"
	PromiseKeys                   PromiseID = "keys-distinct"
	PromiseContextEnded           PromiseID = "context-ended"
	PromiseForeign                PromiseID = "foreign-value-replaced"
	PromiseClockSampler           PromiseID = "clock-sampler"
	PromiseReadStaleness          PromiseID = "read-staleness"
	PromiseLinearizable           PromiseID = "linearizable"
	PromiseNoLostUpdate           PromiseID = "no-lost-update"
	PromiseExpiryWindow           PromiseID = "expiry-window"
	PromiseNotEarly               PromiseID = "expiry-not-early"
	PromiseNotLate                PromiseID = "expiry-not-late"
	PromiseExpiredGet             PromiseID = "expired-absent-get"
	PromiseExpiredCAS             PromiseID = "expired-absent-cas"
	PromiseExpiredDelete          PromiseID = "expired-absent-delete"
	PromiseStateTTL               PromiseID = "state-ttl"
	PromiseReplaceTTL             PromiseID = "write-replaces-ttl"
	PromiseOffGrid                PromiseID = "ttl-rounded-up"
	PromiseSkewedReader           PromiseID = "skewed-reader"
	PromiseFleet                  PromiseID = "breaker-fleet"
	PromiseMargin                 PromiseID = "margin-keeps-probes"
	PromiseMarginPower            PromiseID = "margin-has-power"
	PromiseLostCAS                PromiseID = "lost-answer-cas"
	PromiseLostDelete             PromiseID = "lost-answer-delete"
	PromiseLostFailure            PromiseID = "lost-answer-breaker"
	PromiseListAll                PromiseID = "list-every-live-key"
	PromiseListPrefix             PromiseID = "list-only-live-under-prefix"
	PromiseListLimit              PromiseID = "list-limit"
	PromiseListExpired            PromiseID = "list-not-expired"
	PromiseFollowArgs             PromiseID = "follow-refuses-bad-arguments"
	PromiseFollowSnapshot         PromiseID = "follow-snapshot"
	PromiseFollowOrder            PromiseID = "follow-commit-order"
	PromiseFollowMirror           PromiseID = "follow-mirror-converges"
	PromiseFollowHeartbeat        PromiseID = "follow-heartbeat"
	PromiseFollowExpiry           PromiseID = "follow-expiry"
	PromiseFollowLost             PromiseID = "follow-lost"
	PromiseFollowWipe             PromiseID = "follow-wipe"
	PromiseFollowFeed             PromiseID = "follow-feed-well-formed"
	PromiseFollowContext          PromiseID = "follow-context"
)

var promiseText = map[PromiseID]string{
	PromiseReachable:              "the store must answer",
	PromiseMakeStore:              "the harness must make a store for every case",
	PromiseNoPanic:                "the store must not panic",
	PromiseTraitsWellFormed:       "Traits must be well formed (no negative durations, a known expiry kind)",
	PromiseTraitsStable:           "every store of one harness must declare the same Traits, every time",
	PromiseGetAbsent:              "Get of an absent key must return an error matching driver.ErrNotFound",
	PromiseCreate:                 "CompareAndSwap with driver.NoVersion must create an absent key and return a version other than driver.NoVersion",
	PromiseRead:                   "Get must return the value and version the last write stored",
	PromiseNewVersion:             "every write must return a new version",
	PromiseCreateOnly:             "CompareAndSwap with driver.NoVersion on a present key must fail with an error matching driver.ErrConflict",
	PromiseStaleConflicts:         "CompareAndSwap with a stale version must fail with an error matching driver.ErrConflict and leave the value unchanged",
	PromiseAbsentVersionConflicts: "CompareAndSwap with a version on an absent key must fail with an error matching driver.ErrConflict",
	PromiseConflictValue:          "a *driver.ConflictError must carry the key's real current value and version",
	PromiseDelete:                 "CompareAndDelete with the current version must delete the key",
	PromiseDeleteAbsent:           "CompareAndDelete of an absent key must return an error matching driver.ErrNotFound",
	PromiseDeleteStale:            "CompareAndDelete with a stale version must fail with an error matching driver.ErrConflict and keep the key",
	PromiseNoVersionReuse:         "a re-created key must not reuse a version from before its deletion",
	PromiseKeys:                   "keys must round-trip unchanged and distinct keys must not collide",
	PromiseContextEnded:           "a call with an ended context must fail with the context's error and change nothing",
	PromiseForeign:                "data no Breaker wrote at a key must read as a value with a version (or as absent) that the next write replaces, so it never stops a circuit opening",
	PromiseClockSampler:           "SampleClock must return a non-zero time at a resolution in (0, 1 min] that moves with real time and agrees on one offset, and promptly an error without a time for a canceled context",
	PromiseReadStaleness:          "a Get must see a completed write within the declared ReadStaleness",
	PromiseLinearizable:           "concurrent CompareAndSwaps must be linearizable",
	PromiseNoLostUpdate:           "CompareAndSwap must not lose updates",
	PromiseExpiryWindow:           "an entry must vanish within the window its declared expiry model allows",
	PromiseNotEarly:               "an entry must not vanish before its TTL minus the declared Early and Granularity",
	PromiseNotLate:                "an entry must vanish within its TTL plus the declared Granularity (and Late, for relative expiry)",
	PromiseExpiredGet:             "an expired entry must count as absent for Get",
	PromiseExpiredCAS:             "an expired entry must count as absent for CompareAndSwap",
	PromiseExpiredDelete:          "an expired entry must count as absent for CompareAndDelete",
	PromiseStateTTL:               "an entry written with the StateTTL a default Breaker writes must live that long, and no longer than the declared model allows",
	PromiseReplaceTTL:             "every write must replace the entry's TTL with its own",
	PromiseOffGrid:                "a TTL off the granularity's grid must be rounded up to it, never truncated",
	PromiseSkewedReader:           "a padded store's physical copy must outlast the logical expiry for a reader whose clock is MaxClockSkew behind",
	PromiseFleet:                  "Breakers sharing the store must open together, hold, elect a single probe, reopen on its failure and close on its success",
	PromiseMargin:                 "the TTLMargin RequiredMargin derives from the declared expiry model must keep every half-open probe a probe",
	PromiseMarginPower:            "the margin experiment must have power: one millisecond below the required margin it must see probes demoted",
	PromiseLostCAS:                "a CompareAndSwap applied but whose answer was lost must not report a conflict with its own write",
	PromiseLostDelete:             "a CompareAndDelete applied but whose answer was lost must not report the key not found",
	PromiseLostFailure:            "a Breaker must count a failure once when the store's answer to its write was lost",
	PromiseListAll:                "List must return, across its pages, every live key that begins with the prefix, as written, also while keys are written between pages",
	PromiseListPrefix:             "List must return only live keys that begin with the prefix: none outside it, deleted or never written",
	PromiseListLimit:              "a List page must hold at most limit keys, and a listing must end",
	PromiseListExpired:            "List must leave out an expired entry once Get finds it absent",
	PromiseFollowSnapshot:         "Follow must begin with Reset, a Put of every live key under the prefix with the value and version Get returns, and Synced; no key outside the prefix, deleted or never written",
	PromiseFollowOrder:            "each key's changes must arrive in commit order (merged ones may be left out, none older after a newer one), with their values and versions, its last before a Synced whose At is after it",
	PromiseFollowMirror:           "once a concurrent compare-and-swap storm is quiet, the mirror built from the feed must equal the store at the first Synced whose At is after the last write",
	PromiseFollowHeartbeat:        "with no writes, Synced must arrive at least every heartbeat, with an At that never goes backwards and is never later than its delivery",
	PromiseFollowExpiry:           "an expired entry may arrive as Delete (if the store reports expiry) no earlier than Get finds it gone, and must never arrive as Put again without a write",
	PromiseFollowLost:             "a feed whose connection broke must send Lost and resynchronise (Reset, snapshot, Synced), or resume having missed nothing; never resume silently past a gap",
	PromiseFollowArgs:             "Follow must refuse a heartbeat that is not positive and a nil fn at once, with an error, delivering nothing",
	PromiseFollowWipe:             "keys deleted or replaced behind the adapter's back (a bulk delete, a flush, a restored copy) must reach the feed as deletes, changes or Lost before any Synced whose At is after the change",
	PromiseFollowFeed:             "the feed must keep its grammar: Reset, the snapshot's Puts, Synced, then changes and Synced; Lost (with Err) followed by Reset before the next Synced; one change at a time; no key outside the prefix, no Put without a version",
	PromiseFollowContext:          "Follow must run until its context ends, then return the context's error promptly and call fn no more",
}

// reliedOn lists, in one place, the promises a Breaker relies on that a
// run can leave unverified: the expiry a record's restraint depends on
// (the TTL a Breaker writes, its replacement on every write, rounding up,
// the padding for a reader behind, expiry at all), lost answers (a failure
// counted twice, a probe's own write taken for a rival's), and data no
// Breaker wrote (which must never stop a circuit opening), and, for a
// store that can follow (driver.Follower), a feed that breaks (a Breaker
// with a mirror decides from it). Run and Check
// fail while one of them is not verified, unless the harness waives it
// (Waive); name is the constant's Go name, for the Waive call the report
// suggests, and meaning is what the waiver accepts unchecked.
var reliedOn = map[PromiseID]struct{ name, meaning string }{
	PromiseExpiryWindow:  {"PromiseExpiryWindow", "trusting, unmeasured, that an entry vanishes within the window the declared expiry model allows, on which the TTLMargin a Breaker adds is computed"},
	PromiseNotEarly:      {"PromiseNotEarly", "trusting that no entry vanishes before its TTL minus Early and Granularity: one that does ends a circuit's restraint early"},
	PromiseNotLate:       {"PromiseNotLate", "trusting that an entry vanishes by its TTL plus Granularity (and Late): one that lingers keeps a circuit open after its restraint"},
	PromiseExpiredGet:    {"PromiseExpiredGet", "trusting that Get treats an expired entry as absent"},
	PromiseExpiredCAS:    {"PromiseExpiredCAS", "trusting that CompareAndSwap treats an expired entry as absent"},
	PromiseExpiredDelete: {"PromiseExpiredDelete", "trusting that CompareAndDelete treats an expired entry as absent"},
	PromiseStateTTL:      {"PromiseStateTTL", "trusting, unchecked, that a record written with the StateTTL a Breaker writes (30 min 5 s by default) lives that long: a store that caps or truncates long TTLs drops a circuit's restraint early and turns its half-open probe into a plain send"},
	PromiseReplaceTTL:    {"PromiseReplaceTTL", "trusting that every write replaces the TTL: a store that keeps the creating write's TTL drops a record while its restraint runs"},
	PromiseOffGrid:       {"PromiseOffGrid", "trusting that TTLs are rounded up to the granularity, never truncated: truncation expires a record up to one grid step before its restraint ends"},
	PromiseSkewedReader:  {"PromiseSkewedReader", "trusting that a padded store keeps the physical copy for a reader MaxClockSkew behind, which otherwise finds no record while its clock still counts the circuit open"},
	PromiseReadStaleness: {"PromiseReadStaleness", "trusting that a Get sees a completed write within the declared ReadStaleness"},
	PromiseLostCAS:       {"PromiseLostCAS", "trusting that a CompareAndSwap whose answer was lost never reports a conflict with its own write (a Breaker would count its failure twice, or take its own probe for a rival's)"},
	PromiseLostDelete:    {"PromiseLostDelete", "trusting that a CompareAndDelete whose answer was lost never reports the key not found"},
	PromiseLostFailure:   {"PromiseLostFailure", "trusting that a Breaker counts a failure once when the store's answer to its write was lost"},
	PromiseForeign:       {"PromiseForeign", "trusting that data another program left at a Breaker's key is replaced by the next write and never stops a circuit opening"},
	PromiseFollowLost:    {"PromiseFollowLost", "trusting, untested, that a feed whose connection breaks says Lost and resynchronises rather than resuming past the changes it missed: a Breaker with a mirror would decide from records that are no longer the store's"},
}

// waivable lists the promises Waive accepts, as Go names.
func waivable() string {
	var names []string
	for _, r := range reliedOn {
		names = append(names, r.name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Text is the promise in words, as reports print it. It may be reworded;
// the PromiseID does not change.
func (p PromiseID) Text() string {
	if s, ok := promiseText[p]; ok {
		return s
	}
	return string(p)
}

// Error returns Text, so a PromiseID can be the target of errors.Is. fmt
// therefore prints a PromiseID as its text; string(p) is the ID.
func (p PromiseID) Error() string { return p.Text() }

// Problem is one violation a case found: the case, the promise it breaks,
// and what was seen. The error Check returns holds *Problem values;
// errors.Is(p, p.Promise) is true.
type Problem struct {
	Case    CaseID
	Promise PromiseID
	// Detail is what the case saw, in words.
	Detail string
}

// Error returns "<case>: <promise text>: <detail>".
func (p *Problem) Error() string {
	return fmt.Sprintf("%s: %s: %s", p.Case, p.Promise.Text(), p.Detail)
}

// Unwrap returns the promise broken.
func (p *Problem) Unwrap() error { return p.Promise }
