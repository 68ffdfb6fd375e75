package conformance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CaseID names a case of the suite. It is the subtest name under Run (go
// test -run TestConformance/expiry) and Problem.Case under Check, and it
// does not change when a case's wording does: match on it, not on text.
type CaseID string

// The suite's cases, in the order they run.
const (
	caseReachable             CaseID = "reachable"
	caseTraits                CaseID = "traits"
	caseGetAbsent             CaseID = "get-absent"
	caseCreateAndRead         CaseID = "create-and-read"
	caseVersionsChange        CaseID = "versions-change-on-every-write"
	caseCreateOnly            CaseID = "create-only"
	caseStaleVersion          CaseID = "stale-version-conflicts"
	caseAbsentWithVersion     CaseID = "absent-with-version-conflicts"
	caseCompareAndDelete      CaseID = "compare-and-delete"
	caseCompareAndDeleteStale CaseID = "compare-and-delete-stale"
	caseRecreate              CaseID = "recreate-new-version"
	caseHostileKeys           CaseID = "hostile-keys"
	caseContextEnded          CaseID = "context-ended"
	caseForeign               CaseID = "foreign-value-replaced"
	caseClockSampler          CaseID = "clock-sampler"
	caseReadStaleness         CaseID = "read-staleness"
	caseLinearizable          CaseID = "concurrent-cas-linearizable"
	caseExpiry                CaseID = "expiry"
	caseExpiredAbsent         CaseID = "expired-counts-as-absent"
	caseStateTTL              CaseID = "expiry-at-state-ttl"
	caseReplaceTTL            CaseID = "every-write-replaces-ttl"
	caseOffGrid               CaseID = "ttl-off-grid"
	caseSkewedReader          CaseID = "skewed-reader"
	caseFleet                 CaseID = "breaker-fleet"
	caseMargin                CaseID = "margin-keeps-probes"
	caseLostCAS               CaseID = "lost-answer-cas"
	caseLostDelete            CaseID = "lost-answer-delete"
	caseLostBreaker           CaseID = "lost-answer-breaker"
	caseListPages             CaseID = "list-pages"
	caseListKeys              CaseID = "list-hostile-keys"
	caseListExpired           CaseID = "list-expired"
	caseFollowArgs            CaseID = "follow-arguments"
	caseFollowSnapshot        CaseID = "follow-snapshot"
	caseFollowOrder           CaseID = "follow-order"
	caseFollowStorm           CaseID = "follow-storm"
	caseFollowHeartbeat       CaseID = "follow-heartbeat"
	caseFollowExpiry          CaseID = "follow-expiry"
	caseFollowLost            CaseID = "follow-lost"
	caseFollowWipe            CaseID = "follow-wipe"
)

// PromiseID names a clause of the store contract (or of the harness's) that
// the suite checks. It is stable; Text says it in words.
//
// A PromiseID is also an error: every problem a run reports wraps the
// promise it breaks, so errors.Is(err, conformance.PromiseID("expired-absent-cas")) says
// whether Check's error breaks it. Waive takes one, for the promises a
// harness may be unable to verify.
type PromiseID string

// The promises the suite checks. They are not exported one by one:
// Promises lists them, Text says each in words, and a report names the
// ones it could not verify as the Waive call that would accept them.
const (
	promiseReachable              PromiseID = "reachable"
	promiseMakeStore              PromiseID = "harness-makes-stores"
	promiseNoPanic                PromiseID = "no-panic"
	promiseTraitsWellFormed       PromiseID = "traits-well-formed"
	promiseTraitsStable           PromiseID = "traits-stable"
	promiseGetAbsent              PromiseID = "get-absent-not-found"
	promiseCreate                 PromiseID = "create"
	promiseRead                   PromiseID = "read-what-was-written"
	promiseNewVersion             PromiseID = "new-version-per-write"
	promiseCreateOnly             PromiseID = "create-only"
	promiseStaleConflicts         PromiseID = "stale-version-conflicts"
	promiseAbsentVersionConflicts PromiseID = "absent-with-version-conflicts"
	promiseConflictValue          PromiseID = "conflict-carries-current"
	promiseDelete                 PromiseID = "compare-and-delete"
	promiseDeleteAbsent           PromiseID = "delete-absent-not-found"
	promiseDeleteStale            PromiseID = "delete-stale-conflicts"
	promiseNoVersionReuse         PromiseID = "no-version-reuse"
	promiseKeys                   PromiseID = "keys-distinct"
	promiseContextEnded           PromiseID = "context-ended"
	promiseForeign                PromiseID = "foreign-value-replaced"
	promiseClockSampler           PromiseID = "clock-sampler"
	promiseReadStaleness          PromiseID = "read-staleness"
	promiseLinearizable           PromiseID = "linearizable"
	promiseNoLostUpdate           PromiseID = "no-lost-update"
	promiseExpiryWindow           PromiseID = "expiry-window"
	promiseNotEarly               PromiseID = "expiry-not-early"
	promiseNotLate                PromiseID = "expiry-not-late"
	promiseExpiredGet             PromiseID = "expired-absent-get"
	promiseExpiredCAS             PromiseID = "expired-absent-cas"
	promiseExpiredDelete          PromiseID = "expired-absent-delete"
	promiseStateTTL               PromiseID = "state-ttl"
	promiseReplaceTTL             PromiseID = "write-replaces-ttl"
	promiseOffGrid                PromiseID = "ttl-rounded-up"
	promiseSkewedReader           PromiseID = "skewed-reader"
	promiseFleet                  PromiseID = "breaker-fleet"
	promiseMargin                 PromiseID = "margin-keeps-probes"
	promiseMarginPower            PromiseID = "margin-has-power"
	promiseLostCAS                PromiseID = "lost-answer-cas"
	promiseLostDelete             PromiseID = "lost-answer-delete"
	promiseLostFailure            PromiseID = "lost-answer-breaker"
	promiseListAll                PromiseID = "list-every-live-key"
	promiseListPrefix             PromiseID = "list-only-live-under-prefix"
	promiseListLimit              PromiseID = "list-limit"
	promiseListExpired            PromiseID = "list-not-expired"
	promiseFollowArgs             PromiseID = "follow-refuses-bad-arguments"
	promiseFollowSnapshot         PromiseID = "follow-snapshot"
	promiseFollowOrder            PromiseID = "follow-commit-order"
	promiseFollowMirror           PromiseID = "follow-mirror-converges"
	promiseFollowHeartbeat        PromiseID = "follow-heartbeat"
	promiseFollowExpiry           PromiseID = "follow-expiry"
	promiseFollowLost             PromiseID = "follow-lost"
	promiseFollowWipe             PromiseID = "follow-wipe"
	promiseFollowFeed             PromiseID = "follow-feed-well-formed"
	promiseFollowContext          PromiseID = "follow-context"
)

var promiseText = map[PromiseID]string{
	promiseReachable:              "the store must answer",
	promiseMakeStore:              "the harness must make a store for every case",
	promiseNoPanic:                "the store must not panic",
	promiseTraitsWellFormed:       "Traits must be well formed (no negative durations, a known expiry kind)",
	promiseTraitsStable:           "every store of one harness must declare the same Traits, every time",
	promiseGetAbsent:              "Get of an absent key must return an error matching driver.ErrNotFound",
	promiseCreate:                 "CompareAndSwap with driver.NoVersion must create an absent key and return a version other than driver.NoVersion",
	promiseRead:                   "Get must return the value and version the last write stored",
	promiseNewVersion:             "every write must return a new version",
	promiseCreateOnly:             "CompareAndSwap with driver.NoVersion on a present key must fail with an error matching driver.ErrConflict",
	promiseStaleConflicts:         "CompareAndSwap with a stale version must fail with an error matching driver.ErrConflict and leave the value unchanged",
	promiseAbsentVersionConflicts: "CompareAndSwap with a version on an absent key must fail with an error matching driver.ErrConflict",
	promiseConflictValue:          "a *driver.ConflictError must carry the key's real current value and version",
	promiseDelete:                 "CompareAndDelete with the current version must delete the key",
	promiseDeleteAbsent:           "CompareAndDelete of an absent key must return an error matching driver.ErrNotFound",
	promiseDeleteStale:            "CompareAndDelete with a stale version must fail with an error matching driver.ErrConflict and keep the key",
	promiseNoVersionReuse:         "a re-created key must not reuse a version from before its deletion",
	promiseKeys:                   "keys must round-trip unchanged and distinct keys must not collide",
	promiseContextEnded:           "a call with an ended context must fail with the context's error and change nothing",
	promiseForeign:                "data no Breaker wrote at a key must read as a value with a version (or as absent) that the next write replaces, so it never stops a circuit opening",
	promiseClockSampler:           "SampleClock must return a non-zero time at a resolution in (0, 1 min] that moves with real time and agrees on one offset, and promptly an error without a time for a canceled context",
	promiseReadStaleness:          "a Get must see a completed write within the declared ReadStaleness",
	promiseLinearizable:           "concurrent CompareAndSwaps must be linearizable",
	promiseNoLostUpdate:           "CompareAndSwap must not lose updates",
	promiseExpiryWindow:           "an entry must vanish within the window its declared expiry model allows",
	promiseNotEarly:               "an entry must not vanish before its TTL minus the declared Early and Granularity",
	promiseNotLate:                "an entry must vanish within its TTL plus the declared Granularity (and Late, for relative expiry)",
	promiseExpiredGet:             "an expired entry must count as absent for Get",
	promiseExpiredCAS:             "an expired entry must count as absent for CompareAndSwap",
	promiseExpiredDelete:          "an expired entry must count as absent for CompareAndDelete",
	promiseStateTTL:               "an entry written with the StateTTL a default Breaker writes must live that long, and no longer than the declared model allows",
	promiseReplaceTTL:             "every write must replace the entry's TTL with its own",
	promiseOffGrid:                "a TTL off the granularity's grid must be rounded up to it, never truncated",
	promiseSkewedReader:           "a padded store's physical copy must outlast the logical expiry for a reader whose clock is MaxClockSkew behind",
	promiseFleet:                  "Breakers sharing the store must open together, hold, elect a single probe, reopen on its failure and close on its success",
	promiseMargin:                 "the TTLMargin RequiredMargin derives from the declared expiry model must keep every half-open probe a probe",
	promiseMarginPower:            "the margin experiment must have power: one millisecond below the required margin it must see probes demoted",
	promiseLostCAS:                "a CompareAndSwap applied but whose answer was lost must not report a conflict with its own write",
	promiseLostDelete:             "a CompareAndDelete applied but whose answer was lost must not report the key not found",
	promiseLostFailure:            "a Breaker must count a failure once when the store's answer to its write was lost",
	promiseListAll:                "List must return, across its pages, every live key that begins with the prefix, as written, also while keys are written between pages",
	promiseListPrefix:             "List must return only live keys that begin with the prefix: none outside it, deleted or never written",
	promiseListLimit:              "a List page must hold at most limit keys, and a listing must end",
	promiseListExpired:            "List must leave out an expired entry once Get finds it absent",
	promiseFollowSnapshot:         "Follow must begin with Reset, a Put of every live key under the prefix with the value and version Get returns, and Synced; no key outside the prefix, deleted or never written",
	promiseFollowOrder:            "each key's changes must arrive in commit order (merged ones may be left out, none older after a newer one), with their values and versions, its last before a Synced whose At is after it",
	promiseFollowMirror:           "once a concurrent compare-and-swap storm is quiet, the mirror built from the feed must equal the store at the first Synced whose At is after the last write",
	promiseFollowHeartbeat:        "with no writes, Synced must arrive at least every heartbeat, with an At that never goes backwards and is never later than its delivery",
	promiseFollowExpiry:           "an expired entry may arrive as Delete (if the store reports expiry) no earlier than Get finds it gone, and must never arrive as Put again without a write",
	promiseFollowLost:             "a feed whose connection broke must send Lost and resynchronise (Reset, snapshot, Synced), or resume having missed nothing; never resume silently past a gap",
	promiseFollowArgs:             "Follow must refuse a heartbeat that is not positive and a nil fn at once, with an error, delivering nothing",
	promiseFollowWipe:             "keys deleted or replaced behind the adapter's back (a bulk delete, a flush, a restored copy) must reach the feed as deletes, changes or Lost before any Synced whose At is after the change",
	promiseFollowFeed:             "the feed must keep its grammar: Reset, the snapshot's Puts, Synced, then changes and Synced; Lost (with Err) followed by Reset before the next Synced; one change at a time; no key outside the prefix, no Put without a version",
	promiseFollowContext:          "Follow must run until its context ends, then return the context's error promptly and call fn no more",
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
// (Waive); each maps to what the waiver accepts unchecked.
var reliedOn = map[PromiseID]string{
	promiseExpiryWindow:  "trusting, unmeasured, that an entry vanishes within the window the declared expiry model allows, on which the TTLMargin a Breaker adds is computed",
	promiseNotEarly:      "trusting that no entry vanishes before its TTL minus Early and Granularity: one that does ends a circuit's restraint early",
	promiseNotLate:       "trusting that an entry vanishes by its TTL plus Granularity (and Late): one that lingers keeps a circuit open after its restraint",
	promiseExpiredGet:    "trusting that Get treats an expired entry as absent",
	promiseExpiredCAS:    "trusting that CompareAndSwap treats an expired entry as absent",
	promiseExpiredDelete: "trusting that CompareAndDelete treats an expired entry as absent",
	promiseStateTTL:      "trusting, unchecked, that a record written with the StateTTL a Breaker writes (30 min 5 s by default) lives that long: a store that caps or truncates long TTLs drops a circuit's restraint early and turns its half-open probe into a plain send",
	promiseReplaceTTL:    "trusting that every write replaces the TTL: a store that keeps the creating write's TTL drops a record while its restraint runs",
	promiseOffGrid:       "trusting that TTLs are rounded up to the granularity, never truncated: truncation expires a record up to one grid step before its restraint ends",
	promiseSkewedReader:  "trusting that a padded store keeps the physical copy for a reader MaxClockSkew behind, which otherwise finds no record while its clock still counts the circuit open",
	promiseReadStaleness: "trusting that a Get sees a completed write within the declared ReadStaleness",
	promiseLostCAS:       "trusting that a CompareAndSwap whose answer was lost never reports a conflict with its own write (a Breaker would count its failure twice, or take its own probe for a rival's)",
	promiseLostDelete:    "trusting that a CompareAndDelete whose answer was lost never reports the key not found",
	promiseLostFailure:   "trusting that a Breaker counts a failure once when the store's answer to its write was lost",
	promiseForeign:       "trusting that data another program left at a Breaker's key is replaced by the next write and never stops a circuit opening",
	promiseFollowLost:    "trusting, untested, that a feed whose connection breaks says Lost and resynchronises rather than resuming past the changes it missed: a Breaker with a mirror would decide from records that are no longer the store's",
}

// waivable lists the promises Waive accepts, quoted as a call names them.
func waivable() string {
	var names []string
	for p := range reliedOn {
		names = append(names, strconv.Quote(string(p)))
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
