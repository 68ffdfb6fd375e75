// Package hostmix measures kvbreaker's local cost on a delivery process's
// real host mix: thousands of hosts cycled through, closed and open, one
// goroutine and many, against sony/gobreaker v2's two-step breaker with one
// breaker per host held in a map the way a user would hold them (sync.Map,
// or a sharded map of mutex-guarded maps).
//
// It has no library code and, unlike package bench, starts no servers: the
// stores are in process, so nothing else runs while it measures.
//
//	for i in 1 2 3 4 5 6; do
//	  go test ./bench/hostmix -run '^$' -bench HostMix -benchmem -benchtime 200ms -cpu 1,2,4,8 -count 1
//	done | tee /tmp/hostmix.txt
//	go tool benchstat -col /impl /tmp/hostmix.txt
//
// mode=serial also reports cpu-ns/op, the CPU time of the loop's own thread
// per call (Linux), which a machine shared with other jobs inflates far less
// than ns/op; testdata/interleave.sh runs two builds in turn and
// testdata/paired.py takes the ratios within each run.
//
// bench/RESULTS.md has the figures of one run.
package hostmix
