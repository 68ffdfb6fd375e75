// Command etcdimage is etcd's own server command, built from the Go module
// this repository already depends on (go.etcd.io/etcd/server/v3), so that a
// FROM-scratch etcd image can be built without a registry:
//
//	CGO_ENABLED=0 go build -trimpath -o etcd ./internal/containers/etcdimage
//
// It accepts etcd's flags and environment variables (ETCD_*) unchanged; see
// scripts/containers.sh, which builds the image kvbreaker/etcd:local with it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
