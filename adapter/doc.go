// Package adapter holds what a kvbreaker store adapter needs beside the
// contract in package driver: the pieces every adapter would otherwise
// write again, each with the wording and the edge cases the nine adapters
// in this repository settled on.
//
//   - [Problems] collects a constructor's invalid options as
//     [driver.OptionError] values and joins them, so a user sees every bad
//     option in one error.
//   - [Purge] and [Purger]: the purge options of a store whose rows do not
//     expire by themselves (MySQL, PostgreSQL, SQLite), and the schedule that
//     deletes one batch of expired rows in the background after every so
//     many writes.
//   - [Gate]: what Follow, FollowDemand, List and CompareAndSwap check
//     before they contact the store, in one order (the store closed, then
//     the arguments) and one wording, each refusal the adapter's
//     *driver.OpError; [FollowArgs] and [ListArgs] are its argument checks
//     alone, for a Follow or a List with no store of its own behind it.
//   - [MergeRecords], [MergeRecordsFrom] and [RebaseOnDelete]: the record
//     merging of a store without compare-and-swap that sees concurrent
//     writes (Workers KV), which keeps every failure and restraint.
//   - [BeatClock]: the dating of a feed's beats by the follower's own
//     clock from the store's (driver.DemandFollower: PostgreSQL, Redis),
//     as a lower bound, and the drop of a beat dated after its arrival;
//     [DemandBeats], the bookkeeping around it of a feed that beats on
//     demand: its newest Synced and jitter, its own beat under way, and
//     the dating of a beat that arrives, its own or another's.
//   - [DialContext]: a Dial's context, bounded by [DefaultDialTimeout]
//     when the caller's has no deadline (etcd, NATS, Redis).
//   - [CheckDial]: one connection to a server, within a timeout, before a
//     pool or a client that would retry a refused one until its deadline:
//     a *driver.UnreachableError that says why, at once; [CheckDialURL]
//     for a client that takes an http(s) URL (DynamoDB's endpoint, Workers
//     KV's base URL), naming it as [ShownURL] shows it, without credentials,
//     and [CheckHTTPURL], that URL's check alone, without connecting;
//     [DialFailed], whether an SDK's error says no connection was made
//     (so nothing was sent), and [DialReason], a failed dial in a few
//     words, the Reason of the *driver.UnreachableError built from it;
//     [Ended], whether a context bounded a failure, its deadline passed
//     counting before its timer has fired (Redis, the command);
//     [NoAnswerError] and [NoAnswer], a call the context ended while its
//     request was out, naming the server it waited for (DynamoDB, Workers
//     KV, MySQL, PostgreSQL).
//   - [RowVersion] and [RowVersionArgs]: the version a row of an SQL
//     table reads as, a foreign row's (0 or negative) apart, and the two
//     parameters a conditional write names it by (MySQL, PostgreSQL).
//   - [Explained]: a server's refusal explained in the adapter's words
//     (what to change), which still unwraps to the SDK's error
//     (MySQL, PostgreSQL, Redis); [ErrNoTable], what every backend's
//     missing table matches (DynamoDB, MySQL, PostgreSQL), and
//     [ErrForeignTable], what a table no Store can read matches (MySQL,
//     PostgreSQL), and [ForeignTable], a failed read of such a table.
//   - [Resync] and [Backoff]: a Follow from the call's checks (its Gate)
//     on, its sessions one after another, a Lost after each that began, a
//     doubling wait between them while the store refuses (etcd, NATS; the
//     wait alone: PostgreSQL, Redis, SQLite).
//   - [Feed]: one Follow or FollowDemand call as its sessions see it (etcd,
//     NATS): its arguments, the newest Synced delivered, whether a beat
//     asked for is due, and the bound of one of its requests.
//   - [PendingBeats]: a feed's heartbeats waiting for its changes to reach
//     the position each read (etcd's revision, a NATS consumer's sequence).
//   - [PrefixEnd] and [NextCursor]: a listed prefix's bytewise range and
//     the cursor after a page (MySQL, SQLite; the cursor: PostgreSQL too).
//   - [Resend], [NoVersionDelete] and [RowExpiry]: the resend of a
//     statement whose answer was lost, CompareAndDelete of
//     driver.NoVersion answered from a read, and Expiry from a row's
//     microseconds left (MySQL, PostgreSQL).
//   - [CeilSeconds]: a TTL in whole seconds, rounded up, at least 1 (etcd,
//     NATS).
//   - [ServerExpiry]: the Traits of a store whose server expires keys by
//     its own clock, from the three durations in which such stores differ
//     (etcd, NATS, Redis); [RowTraits], those of an SQL row store whose
//     expiry is the server's clock plus the TTL in microseconds (MySQL,
//     PostgreSQL).
//   - [SampleClock]: a ClockSampler whose server answers its clock in one
//     call, behind the store's Gate (MySQL, PostgreSQL, Redis);
//     [SQLTableName], an SQL table's name checked as a plain lower-case
//     identifier within the server's limit (MySQL, PostgreSQL).
//   - [OpGet], [OpSwap], [OpDelete], [OpList], [OpExpiry], [OpFollow] and
//     [OpClock]: the Op of a *driver.OpError from each of the contract's
//     methods, spelled once.
//
// driver says what an adapter must do; adapter helps it do that. Neither
// imports a backend or an SDK. This package's example_store_test.go is a
// whole adapter built with it (a table of rows that do not expire by
// themselves), held to the conformance suite by one call
// (conformance/ADAPTERS.md).
package adapter
