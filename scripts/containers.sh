#!/usr/bin/env bash
# Container mode of kvbreaker's integration tests (internal/testservers/containers), for
# CI: builds the etcd and DynamoDB-compatible images locally (no registry is
# needed), starts a private Docker daemon if none is running, runs
#
#   go test -race ./internal/testservers/containers/...
#
# with KVBREAKER_CONTAINERS=1 against those images on the host network, prints
# the conformance matrix, and stops the daemon it started (by PID) on exit.
#
# Environment (all optional):
#   KVBREAKER_ETCD_IMAGE      use this etcd image instead of building kvbreaker/etcd:local
#   KVBREAKER_DYNAMODB_IMAGE  use this image instead of building kvbreaker/dynalite:local
#                             (amazon/dynamodb-local or a dynalite image, see DEVELOPERS.md)
#   KVBREAKER_CONTAINERS_NETWORK  host (default) or bridge, with a daemon already running
#   KVBREAKER_KEEP_DOCKER=1   leave the daemon this script started running (for debugging)
#   GOTEST_FLAGS              extra go test flags, e.g. "-run TestConformanceEtcd -v"
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
export PATH="$(go env GOPATH)/bin:$PATH"

log() { printf 'containers.sh: %s\n' "$*" >&2; }

work=$(mktemp -d /tmp/kvbc.XXXXXX) # short: it holds the daemon's unix socket
dockerd_pid=""

cleanup() {
	local rc=$?
	if [ -n "$dockerd_pid" ] && [ "${KVBREAKER_KEEP_DOCKER:-}" != 1 ]; then
		# Remove what the tests left, networks included: testcontainers
		# creates a default bridge network (there is no "bridge" here), and
		# a daemon stopped with networks in place leaves their br-*
		# interfaces and routes on the host, where the next daemon's
		# subnets collide with them.
		local nets
		nets=$(docker network ls -q --filter type=custom 2>/dev/null || true)
		docker ps -aq 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1 || true
		[ -z "$nets" ] || docker network rm $nets >/dev/null 2>&1 || true
		log "stopping dockerd (pid $dockerd_pid)"
		kill -TERM "$dockerd_pid" 2>/dev/null || true
		for _ in $(seq 1 150); do
			kill -0 "$dockerd_pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$dockerd_pid" 2>/dev/null; then
			log "dockerd (pid $dockerd_pid) did not exit in 30 s; killing it"
			kill -KILL "$dockerd_pid" 2>/dev/null || true
		fi
		wait "$dockerd_pid" 2>/dev/null || true
		for n in $nets; do
			ip link delete "br-${n:0:12}" 2>/dev/null || true
		done
		# The daemon's data lives under $work, and it leaves a network
		# namespace mounted there (exec-root/netns/default): unmount what
		# is mounted under $work, deepest first, then remove it.
		awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r |
			while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
		rm -rf "$work" 2>/dev/null || log "could not remove $work entirely"
	elif [ -z "$dockerd_pid" ]; then
		rm -rf "$work"
	else
		log "KVBREAKER_KEEP_DOCKER=1: dockerd (pid $dockerd_pid) keeps running; DOCKER_HOST=$DOCKER_HOST; stop it with: kill $dockerd_pid"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$(date +%s)

# --- 1. A Docker daemon ------------------------------------------------------
if docker info >/dev/null 2>&1; then
	log "using the Docker daemon already running ($(docker info --format '{{.ServerVersion}}' 2>/dev/null))"
else
	if ! command -v dockerd >/dev/null 2>&1; then
		log "dockerd not found: installing Debian's docker.io"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
	fi
	export DOCKER_HOST="unix://$work/docker.sock"
	log "starting dockerd (log: $work/dockerd.log)"
	dockerd --iptables=false --ip6tables=false --ip-masq=false --bridge=none \
		--host "$DOCKER_HOST" --data-root "$work/data" --exec-root "$work/exec" \
		--pidfile "$work/dockerd.pid" >"$work/dockerd.log" 2>&1 &
	dockerd_pid=$!
	for i in $(seq 1 150); do
		if docker info >/dev/null 2>&1; then break; fi
		if ! kill -0 "$dockerd_pid" 2>/dev/null; then
			log "dockerd exited while starting; its log:"
			cat "$work/dockerd.log" >&2
			dockerd_pid=""
			exit 1
		fi
		if [ "$i" = 150 ]; then
			log "dockerd not ready after 30 s; its log:"
			tail -n 50 "$work/dockerd.log" >&2
			exit 1
		fi
		sleep 0.2
	done
	log "dockerd $(docker info --format '{{.ServerVersion}} ({{.Driver}})') ready after $(($(date +%s) - start)) s"
fi
# The legacy builder needs no buildx plugin; FROM scratch needs no registry.
export DOCKER_BUILDKIT=0

# --- 2. Images ---------------------------------------------------------------
# build_image TAG DIR: docker build, quiet unless it fails.
build_image() {
	if ! docker build -q -t "$1" "$2" >"$work/build.log" 2>&1; then
		log "docker build of $1 failed:"
		cat "$work/build.log" >&2
		exit 1
	fi
}
if [ -z "${KVBREAKER_ETCD_IMAGE:-}" ]; then
	export KVBREAKER_ETCD_IMAGE=kvbreaker/etcd:local
	log "building $KVBREAKER_ETCD_IMAGE (static etcd from go.etcd.io/etcd/server/v3, FROM scratch)"
	mkdir -p "$work/etcd/rootfs/usr/local/bin"
	CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/etcd/rootfs/usr/local/bin/etcd" ./internal/testservers/etcdserver
	cat >"$work/etcd/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin
EXPOSE 2379 2380
CMD ["etcd"]
DOCKERFILE
	build_image "$KVBREAKER_ETCD_IMAGE" "$work/etcd"
fi

if [ -z "${KVBREAKER_DYNAMODB_IMAGE:-}" ]; then
	export KVBREAKER_DYNAMODB_IMAGE=kvbreaker/dynalite:local
	log "building $KVBREAKER_DYNAMODB_IMAGE (this machine's node + dynalite from internal/testservers/dynalite, FROM scratch)"
	if [ ! -f internal/testservers/dynalite/node_modules/dynalite/package.json ]; then
		(cd internal/testservers/dynalite && npm ci --no-audit --no-fund)
	fi
	if ! command -v node >/dev/null 2>&1; then
		log "node not found: install Node.js 20 or later (e.g. apt-get install nodejs npm), or set KVBREAKER_DYNAMODB_IMAGE"
		exit 1
	fi
	node=$(readlink -f "$(command -v node)")
	root="$work/dynalite/rootfs"
	mkdir -p "$root/usr/local/bin" "$root/app" "$root/tmp"
	chmod 1777 "$root/tmp"
	cp "$node" "$root/usr/local/bin/node"
	# The shared libraries node links, at the paths its loader expects.
	ldd "$node" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
	cp -r internal/testservers/dynalite/node_modules "$root/app/node_modules"
	cat >"$work/dynalite/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin NODE_ENV=production
WORKDIR /app
EXPOSE 4567
ENTRYPOINT ["/usr/local/bin/node", "/app/node_modules/dynalite/cli.js"]
CMD ["--port", "4567", "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
DOCKERFILE
	build_image "$KVBREAKER_DYNAMODB_IMAGE" "$work/dynalite"
fi
log "images ready after $(($(date +%s) - start)) s: $KVBREAKER_ETCD_IMAGE, $KVBREAKER_DYNAMODB_IMAGE"

# --- 3. The container-mode tests --------------------------------------------
export KVBREAKER_CONTAINERS=1
# Host network unless asked otherwise; a daemon this script started has no
# bridge, so it always gets the host network.
export KVBREAKER_CONTAINERS_NETWORK="${KVBREAKER_CONTAINERS_NETWORK:-host}"
if [ -n "$dockerd_pid" ]; then KVBREAKER_CONTAINERS_NETWORK=host; fi
export TESTCONTAINERS_RYUK_DISABLED=true
export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
log "go test -race ./internal/testservers/containers/... ($KVBREAKER_CONTAINERS_NETWORK network, images $KVBREAKER_ETCD_IMAGE and $KVBREAKER_DYNAMODB_IMAGE)"
set -o pipefail
# shellcheck disable=SC2086 # GOTEST_FLAGS is a list of flags
go test -race -count=1 -timeout 20m -json ${GOTEST_FLAGS:-} ./internal/testservers/containers/... |
	go run ./tools/matrix
log "done in $(($(date +%s) - start)) s"
