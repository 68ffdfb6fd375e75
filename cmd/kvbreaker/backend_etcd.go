package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
)

var etcdBackend = backendDesc{
	name:  "etcd",
	title: "etcd",
	flags: tlsFileFlags("etcd", connFlag{name: "etcd-endpoints", env: "KVBREAKER_ETCD_ENDPOINTS", usage: "etcd: comma-separated client URLs, e.g. https://etcd-1:2379,https://etcd-2:2379", secret: true,
		need: true, list: "endpoint", check: checkWith(adapter.CheckHTTPURL, redactURL)}, "https://", "http://", "the servers' certificates, for https:// endpoints"),
	usage: `--etcd-endpoints https://etcd-1:2379,https://etcd-2:2379
[--etcd-cacert ca.pem [--etcd-cert client.pem --etcd-key client-key.pem]]`,
	open:    openEtcd,
	wipes:   "a compaction past a watch, and a restore (its members restart, which breaks every watch), are seen as Lost; a delete of the range or a revoked lease arrives as deletes. A restore that kept the members' client connections open would not be seen: restart the fleet's processes after a restore",
	example: "--etcd-endpoints http://127.0.0.1:2379",
	examples: map[string]string{"check": `  kvbreaker check --backend etcd --etcd-endpoints https://etcd-1:2379 \
      --etcd-cacert ca.pem --etcd-cert client.pem --etcd-key client-key.pem`},
}

func openEtcd(ctx context.Context, f *backendFlags) (*conn, error) {
	tlsConfig, err := loadTLS(f)
	if err != nil {
		return nil, err
	}
	return opened(etcd.Dial(ctx, f.list("etcd-endpoints"), etcd.WithTLSConfig(tlsConfig)))
}
