package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/testservers/etcdtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/tlstest"
)

// wantFail runs the command, which must fail (exit 1) saying each of want.
func wantFail(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, out, errOut := runT(t, args...)
	if code != exitFail {
		t.Errorf("kvbreaker %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, exitFail, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("kvbreaker %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, errOut)
		}
	}
}

// TestEtcdClientCertificates: list, inspect, reset and check against an
// etcd that requires TLS and a client certificate, with --etcd-cacert,
// --etcd-cert and --etcd-key or their variables; a CA that did not sign
// the server's certificate, a missing client certificate and an http://
// endpoint each fail naming the flag that fixes it.
func TestEtcdClientCertificates(t *testing.T) {
	pki := tlstest.MustNew(t, "etcd test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := etcdtest.MustStartWith(t, etcdtest.Options{TLS: pki, ClientCerts: true})
	st, err := etcd.Dial(t.Context(), srv.Endpoints(), etcd.WithTLSConfig(pki.ClientConfig()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ep := srv.Endpoints()[0]
	backendScenario{
		backend: "etcd",
		store:   st,
		flags:   []string{"--etcd-endpoints", ep, "--etcd-cacert", pki.CAFile, "--etcd-cert", pki.ClientCertFile, "--etcd-key", pki.ClientKeyFile},
		env: map[string]string{"KVBREAKER_ETCD_ENDPOINTS": ep, "KVBREAKER_ETCD_CACERT": pki.CAFile,
			"KVBREAKER_ETCD_CERT": pki.ClientCertFile, "KVBREAKER_ETCD_KEY": pki.ClientKeyFile},
		dead: func(addr string) []string {
			return []string{"--etcd-endpoints", "https://" + addr, "--etcd-cacert", pki.CAFile, "--etcd-cert", pki.ClientCertFile, "--etcd-key", pki.ClientKeyFile}
		},
	}.run(t)
	clearEnv(t, "KVBREAKER_ETCD_ENDPOINTS", "KVBREAKER_ETCD_CACERT", "KVBREAKER_ETCD_CERT", "KVBREAKER_ETCD_KEY")
	base := []string{"inspect", "--backend", "etcd", "--etcd-endpoints", ep}
	wantFail(t, append(base, "--etcd-cacert", other.CAFile, "--etcd-cert", pki.ClientCertFile, "--etcd-key", pki.ClientKeyFile, "x.example"),
		"etcd at "+ep+": TLS failed: the server's certificate is signed by an authority the client does not trust (\"etcd test CA\"): give the CA that signed it with --etcd-cacert (or $KVBREAKER_ETCD_CACERT)")
	wantFail(t, append(base, "--etcd-cacert", pki.CAFile, "x.example"),
		"requires a client certificate", "--etcd-cert (or $KVBREAKER_ETCD_CERT) and --etcd-key (or $KVBREAKER_ETCD_KEY)")
	wantFail(t, []string{"inspect", "--backend", "etcd", "--etcd-endpoints", "http://" + strings.TrimPrefix(ep, "https://"), "x.example"},
		"the server speaks TLS and the client plain text: use https:// in --etcd-endpoints, with --etcd-cacert")
}

// clearEnv empties what backendScenario set in the environment, so that the
// runs after it take their connection from their flags only.
func clearEnv(t *testing.T, names ...string) {
	for _, n := range names {
		t.Setenv(n, "")
	}
}

// commandUser is an ACL user with what the command needs (the Store's
// commands, and INFO) on the keys of backendScenario (cli-…) and of check
// (check-…).
const commandUser = "cmd on >cmd-password resetkeys ~cli-* ~check-* resetchannels &__redis__:invalidate -@all +info" +
	" +ping +client|setname +client|id +hmget +evalsha +eval +get +hgetall +lrange +smembers +zrange +xrange +dump +type" +
	" +hset +hdel +del +pexpire +pttl +time +scan +hexists +subscribe +client|tracking +publish"

// TestRedisTLSAndACLUser: list, inspect, reset and check against a Redis
// that speaks only TLS and requires a client certificate, as an ACL user
// limited to the scenario's and check's keys, with --redis-cacert,
// --redis-cert and --redis-key or their variables. The user is refused
// another prefix with the commands to grant; a CA that did not sign the
// server's certificate, a missing client certificate and a redis:// URL
// each fail naming the flag that fixes it; TLS flags with a redis:// URL
// are a usage error.
func TestRedisTLSAndACLUser(t *testing.T) {
	pki := tlstest.MustNew(t, "redis test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := redistest.MustStartWith(t, redistest.Options{TLS: pki, ClientCerts: true, Users: []string{commandUser}})
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), TLSConfig: pki.ClientConfig(), ContextTimeoutEnabled: true})
	defer cli.Close()
	st, err := redis.New(cli)
	if err != nil {
		t.Fatal(err)
	}
	url := "rediss://cmd:cmd-password@" + srv.Addr() + "/0"
	tlsFlags := []string{"--redis-cacert", pki.CAFile, "--redis-cert", pki.ClientCertFile, "--redis-key", pki.ClientKeyFile}
	backendScenario{
		backend: "redis",
		store:   st,
		flags:   append([]string{"--redis-url", url}, tlsFlags...),
		env: map[string]string{"KVBREAKER_REDIS_URL": url, "KVBREAKER_REDIS_CACERT": pki.CAFile,
			"KVBREAKER_REDIS_CERT": pki.ClientCertFile, "KVBREAKER_REDIS_KEY": pki.ClientKeyFile},
		dead: func(addr string) []string {
			return append([]string{"--redis-url", "rediss://" + addr + "/0"}, tlsFlags...)
		},
	}.run(t)
	clearEnv(t, "KVBREAKER_REDIS_URL", "KVBREAKER_REDIS_CACERT", "KVBREAKER_REDIS_CERT", "KVBREAKER_REDIS_KEY")
	base := []string{"inspect", "--backend", "redis", "--redis-url", url}
	wantFail(t, append(append(base, tlsFlags...), "--prefix", "fleet-b/", "x.example"), "NOPERM")
	wantFail(t, append(base, "--redis-cacert", other.CAFile, "--redis-cert", pki.ClientCertFile, "--redis-key", pki.ClientKeyFile, "x.example"),
		"redis at "+srv.Addr()+": TLS failed: the server's certificate is signed by an authority the client does not trust (\"redis test CA\"): give the CA that signed it with --redis-cacert (or $KVBREAKER_REDIS_CACERT)")
	wantFail(t, append(base, "--redis-cacert", pki.CAFile, "x.example"),
		"requires a client certificate", "--redis-cert (or $KVBREAKER_REDIS_CERT) and --redis-key (or $KVBREAKER_REDIS_KEY)")
	wantFail(t, []string{"inspect", "--backend", "redis", "--redis-url", "redis://cmd:cmd-password@" + srv.Addr() + "/0", "x.example"},
		"the server speaks TLS and the client plain text: use rediss:// in --redis-url, with --redis-cacert")
	code, _, errOut := runT(t, "inspect", "--backend", "redis", "--redis-url", "redis://"+srv.Addr()+"/0", "--redis-cacert", pki.CAFile, "x.example")
	if code != exitUsage || !strings.Contains(errOut, "must start with rediss://") {
		t.Errorf("--redis-cacert with redis://: exit %d, stderr %q", code, errOut)
	}
}

// TestPostgresVerifyFullAndRole: list, inspect, reset and check against a
// PostgreSQL that refuses TCP without TLS, with sslmode=verify-full and
// sslrootcert= in the URL (or $PGSSLROOTCERT), as a role with rights on the
// command's table only. A role without them is told the GRANTs; a CA that
// did not sign the server's certificate fails naming sslrootcert.
func TestPostgresVerifyFullAndRole(t *testing.T) {
	pki := tlstest.MustNew(t, "postgres test CA")
	other := tlstest.MustNew(t, "another CA")
	srv := pgtest.MustStartWith(t, pgtest.Options{TLS: pki})
	ctx := context.Background()
	admin, err := pgxpool.New(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := postgres.CreateTable(ctx, admin, defaultPostgresTable); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE ROLE app LOGIN", "CREATE ROLE nobody LOGIN",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON kvbreaker TO app", "GRANT USAGE ON SEQUENCE kvbreaker_version TO app"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st, err := postgres.New(admin, defaultPostgresTable)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	url := "postgres://app@" + srv.Addr() + "/postgres?sslmode=verify-full&sslrootcert=" + pki.CAFile
	backendScenario{
		backend: "postgres",
		store:   st,
		flags:   []string{"--postgres-url", url},
		env: map[string]string{"KVBREAKER_POSTGRES_URL": "postgres://app@" + srv.Addr() + "/postgres",
			"PGSSLMODE": "verify-full", "PGSSLROOTCERT": pki.CAFile},
		dead: func(addr string) []string {
			return []string{"--postgres-url", "postgres://app@" + addr + "/postgres?sslmode=verify-full"}
		},
	}.run(t)
	clearEnv(t, "KVBREAKER_POSTGRES_URL", "PGSSLMODE", "PGSSLROOTCERT")
	wantFail(t, []string{"inspect", "--backend", "postgres", "--postgres-url", strings.Replace(url, "app@", "nobody@", 1), "x.example"},
		`user "nobody" lacks a privilege on table kvbreaker`, "GRANT SELECT, INSERT, UPDATE, DELETE ON kvbreaker")
	wantFail(t, []string{"inspect", "--backend", "postgres", "--postgres-url", strings.Replace(url, pki.CAFile, other.CAFile, 1), "x.example"},
		"postgres at "+srv.Addr()+": TLS failed: the server's certificate is signed by an authority the client does not trust (\"postgres test CA\"): give the authority that signed it as sslrootcert= in --postgres-url")
}
