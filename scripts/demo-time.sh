#!/bin/bash
# demo-time.sh times `make demo` as a stranger's first run meets it: a fresh
# clone with empty GOMODCACHE and GOCACHE, cold once then warm twice, ROUNDS
# times (default 3). Modules come from PROXY (default: the Go proxy this
# machine's `go env GOPROXY` names; PROXY=file://$(go env GOMODCACHE)/cache/download
# takes them from the local module cache, leaving network time out).
# Prints, per run, wall seconds, user and system CPU seconds, peak resident KB.
set -eu
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
proxy=${PROXY:-$(go env GOPROXY)}
for r in $(seq "${ROUNDS:-3}"); do
	d=$(mktemp -d)
	git clone -q "$repo" "$d/kv"
	mkdir "$d/mod" "$d/cache"
	echo "round $r: load $(cut -d' ' -f1 /proc/loadavg)"
	for run in cold warm warm; do
		(cd "$d/kv" && GOMODCACHE="$d/mod" GOCACHE="$d/cache" GOPROXY="$proxy" GOFLAGS=-modcacherw \
			/usr/bin/time -f "  $run: %e s wall, %U s user, %S s system, %M KB" make -s demo 2>&1 >/dev/null | tail -1)
	done
	echo "  load after: $(cut -d' ' -f1 /proc/loadavg)"
	chmod -R u+w "$d"
	rm -rf "$d"
done
