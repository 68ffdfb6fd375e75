package main

import (
	"context"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
)

var etcdBackend = backendDesc{
	name:  "etcd",
	title: "etcd",
	flags: []connFlag{
		{name: "etcd-endpoints", env: "KVBREAKER_ETCD_ENDPOINTS", usage: "etcd: comma-separated client URLs, e.g. https://etcd-1:2379,https://etcd-2:2379", secret: true,
			need: true, list: "endpoint", check: (*backendFlags).checkURL},
		{name: "etcd-cacert", env: "KVBREAKER_ETCD_CACERT", usage: "etcd: PEM `file` of the CA that signed the servers' certificates (turns TLS on)", file: true},
		{name: "etcd-cert", env: "KVBREAKER_ETCD_CERT", usage: "etcd: PEM client certificate `file`, for mutual TLS (with --etcd-key)", file: true},
		{name: "etcd-key", env: "KVBREAKER_ETCD_KEY", usage: "etcd: PEM client key `file`, for mutual TLS (with --etcd-cert)", file: true},
	},
	usage: `--etcd-endpoints https://etcd-1:2379,https://etcd-2:2379
[--etcd-cacert ca.pem [--etcd-cert client.pem --etcd-key client-key.pem]]`,
	validate: func(f *backendFlags) error { return f.pairedFlags("etcd-cert", "etcd-key", "mutual TLS") },
	open:     openEtcd,
	tlsFix:   fileTLSFix("etcd-cacert", "etcd-cert", "etcd-key", "etcd-endpoints", "https://", "http://"),
	example:  "--etcd-endpoints http://127.0.0.1:2379",
	examples: map[string]string{"check": `  kvbreaker check --backend etcd --etcd-endpoints https://etcd-1:2379 \
      --etcd-cacert ca.pem --etcd-cert client.pem --etcd-key client-key.pem`},
}

func openEtcd(ctx context.Context, f *backendFlags) (*conn, error) {
	tlsConfig, err := loadTLS(f, "etcd-cacert", "etcd-cert", "etcd-key")
	if err != nil {
		return nil, err
	}
	s, err := etcd.Dial(ctx, f.list("etcd-endpoints"), etcd.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, noAnswer(ctx, "etcd", "", f.bound, err)
	}
	return &conn{describe: s.String(), store: s,
		wipes: "a compaction past a watch, and a restore (its members restart, which breaks every watch), are seen as Lost; a delete of the range or a revoked lease arrives as deletes. A restore that kept the members' client connections open would not be seen: restart the fleet's processes after a restore"}, nil
}
