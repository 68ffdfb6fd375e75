package main

import "strings"

// wipeContract states, for a store whose feed a mirror follows, which
// changes made behind the adapters' back its feed cannot see (the
// operator's contract, docs/backends.md "Changes behind the adapters'
// back"), or "" for a store without a feed.
func wipeContract(describe string) string {
	switch {
	case strings.HasPrefix(describe, "postgres"):
		return "rows changed with the table's triggers off (DISABLE TRIGGER, session_replication_role = replica, pg_restore --disable-triggers) reach no mirror: restart the fleet's processes after such a change"
	case strings.HasPrefix(describe, "redis at"):
		return "SWAPDB is seen through a key per follower (kvbreaker:follow:<id>, kept an hour past its last check); under an ACL that refuses that key it is not: restart the fleet's processes after one"
	case strings.HasPrefix(describe, "sqlite"):
		return "rows deleted by another program are seen through the trigger kvbreaker_deleted; rows changed in place without a new version, or deleted with that trigger dropped, are not: restart the fleet's processes after such a change"
	case strings.HasPrefix(describe, "nats"):
		return "a purge or a deleted message is seen when the stream's message or subject count falls between two heartbeats; one hidden by as many new keys created in the same heartbeat is not: restart the fleet's processes after removing messages by hand"
	case strings.HasPrefix(describe, "etcd"):
		return "a compaction past a watch, and a restore (its members restart, which breaks every watch), are seen as Lost; a delete of the range or a revoked lease arrives as deletes. A restore that kept the members' client connections open would not be seen: restart the fleet's processes after a restore"
	}
	return ""
}
