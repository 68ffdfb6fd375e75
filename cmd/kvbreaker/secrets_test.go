package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// errorTexts is the message of err and of every error it wraps.
func errorTexts(err error) []string {
	if err == nil {
		return nil
	}
	out := []string{err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		out = append(out, errorTexts(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, errorTexts(e)...)
		}
	}
	return out
}

// TestSecretsNeverShown: for every backend the command connects to, every
// place a URL, a connection string or the environment carries a
// credential (user information, password= and token= parameters,
// PostgreSQL keyword/value strings quoted or not, $PGPASSWORD, the Workers
// KV API token, AWS secret keys), and every error path (a bad or
// unparsable URL, a refused port, a refused credential from a real server,
// a missing table, bad flags, the environment), with each of check,
// inspect, reset and list: the secret appears neither on stdout, nor on
// stderr, nor in any error the command returns (the message printed, and
// every error it wraps). The rows that redacting a URL's password misses:
// keyword/value PostgreSQL strings (pg-kv-*, pg-env-kv-*), which an error
// can echo whole, an unparsable URL (pg-url-unparsable), and a password=
// or token= query parameter (etcd-query-*, cf-base-query,
// dynamodb-endpoint-query), which url.URL.Redacted leaves in place.
func TestSecretsNeverShown(t *testing.T) {
	dead, dead2 := closedPort(t), closedPort(t)
	ctx := t.Context()

	// PostgreSQL with a role that must give a password (scram), the
	// others by trust: a refused password is a real server's answer.
	pg := pgtest.MustStart(t)
	pool, err := pgxpool.New(ctx, pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	hba := filepath.Join(pg.DataDir(), "pg_hba.conf")
	conf, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all locked 127.0.0.1/32 scram-sha-256\n"), conf...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE ROLE locked LOGIN PASSWORD 'the-right-one'", "SELECT pg_reload_conf()"} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	pgHost, pgPort, _ := strings.Cut(pg.Addr(), ":")
	_, deadPort, _ := strings.Cut(dead, ":")

	rs := redistest.MustStart(t)
	rc := goredis.NewClient(&goredis.Options{Addr: rs.Addr()})
	defer rc.Close()
	if err := rc.Do(ctx, "ACL", "SETUSER", "locked", "on", ">the-right-one", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}

	type row struct {
		name string
		// conn are the connection flags with the secret in them (as
		// "SECRET", replaced by the row's own); env likewise.
		conn []string
		env  map[string]string
		// code is the exit code (1: the connection failed, 2: usage);
		// want is in stderr, so that the row reaches its error path.
		code int
		want string
	}
	dyn := func(endpoint string) []string {
		return []string{"--backend", "dynamodb", "--dynamodb-table", dynTable, "--dynamodb-endpoint", endpoint}
	}
	cf := func(base string) []string {
		return []string{"--backend", "cloudflarekv", "--cf-account", cfSrv.AccountID, "--cf-namespace", cfSrv.NamespaceID, "--cf-base-url", base}
	}
	pgArgs := func(dsn string) []string { return []string{"--backend", "postgres", "--postgres-url", dsn} }
	pgKV := func(port, user, extra string) string {
		return "host=127.0.0.1 port=" + port + " user=" + user + " dbname=postgres sslmode=disable " + extra
	}
	refused := "connection refused"
	rows := []row{
		// etcd
		{"etcd-userinfo", []string{"--backend", "etcd", "--etcd-endpoints", "http://u:SECRET@" + dead}, nil, exitFail, refused},
		{"etcd-query", []string{"--backend", "etcd", "--etcd-endpoints", "http://" + dead + "/?password=SECRET"}, nil, exitFail, refused},
		{"etcd-two-endpoints", []string{"--backend", "etcd", "--etcd-endpoints", "http://u:SECRET@" + dead + ",http://v:SECRET@" + dead2}, nil, exitFail, refused},
		{"etcd-unparsable", []string{"--backend", "etcd", "--etcd-endpoints", "http://u:SECRET@bad host:1"}, nil, exitUsage, "want an http:// or https:// URL"},
		{"etcd-no-scheme", []string{"--backend", "etcd", "--etcd-endpoints", "u:SECRET@" + dead}, nil, exitUsage, "want an http:// or https:// URL"},
		{"etcd-env", []string{"--backend", "etcd"}, map[string]string{"KVBREAKER_ETCD_ENDPOINTS": "http://u:SECRET@" + dead}, exitFail, refused},
		// DynamoDB
		{"dynamodb-secret-key-refused", dyn("http://" + dead), map[string]string{"AWS_SECRET_ACCESS_KEY": "SECRET"}, exitFail, refused},
		{"dynamodb-secret-key-missing-table", []string{"--backend", "dynamodb", "--dynamodb-table", "no-such-table", "--dynamodb-endpoint", dynSrv.Endpoint},
			map[string]string{"AWS_SECRET_ACCESS_KEY": "SECRET"}, exitFail, "ResourceNotFoundException"},
		{"dynamodb-session-token", []string{"--backend", "dynamodb", "--dynamodb-table", "no-such-table", "--dynamodb-endpoint", dynSrv.Endpoint},
			map[string]string{"AWS_SESSION_TOKEN": "SECRET"}, exitFail, "ResourceNotFoundException"},
		{"dynamodb-endpoint-userinfo", dyn("http://u:SECRET@" + dead), nil, exitFail, refused},
		{"dynamodb-endpoint-query", dyn("http://" + dead + "/?X-Amz-Security-Token=SECRET"), nil, exitFail, refused},
		{"dynamodb-endpoint-unparsable", dyn("http://u:SECRET@bad host"), nil, exitUsage, "want an http:// or https:// URL"},
		{"dynamodb-env", []string{"--backend", "dynamodb", "--dynamodb-table", dynTable}, map[string]string{"KVBREAKER_DYNAMODB_ENDPOINT": "http://u:SECRET@" + dead}, exitFail, refused},
		// Workers KV
		{"cf-token-refused", cf("http://" + dead + "/client/v4/"), map[string]string{TokenEnv: "SECRET"}, exitFail, refused},
		{"cf-token-wrong", cf(cfSrv.BaseURL()), map[string]string{TokenEnv: "SECRET"}, exitFail, "(are the API token ($" + TokenEnv + "), with Workers KV Storage: Edit permission, the account ID (--cf-account) and the namespace ID (--cf-namespace) right?)"},
		{"cf-base-userinfo", cf("http://u:SECRET@" + dead + "/client/v4/"), nil, exitFail, refused},
		{"cf-base-query", cf("http://" + dead + "/client/v4/?token=SECRET"), nil, exitFail, refused},
		{"cf-base-unparsable", cf("http://u:SECRET@bad host/client/v4/"), nil, exitUsage, "--cf-base-url"},
		// Redis, one server and Cluster
		{"redis-userinfo-refused", []string{"--backend", "redis", "--redis-url", "redis://u:SECRET@" + dead + "/0"}, nil, exitFail, refused},
		{"redis-password-refused", []string{"--backend", "redis", "--redis-url", "redis://:SECRET@" + dead + "/0"}, nil, exitFail, refused},
		{"redis-password-query", []string{"--backend", "redis", "--redis-url", "redis://" + dead + "/0?password=SECRET"}, nil, exitUsage, "--redis-url"},
		{"redis-unparsable", []string{"--backend", "redis", "--redis-url", "redis://:SECRET@bad host:1/0"}, nil, exitUsage, "--redis-url"},
		{"redis-wrong-password", []string{"--backend", "redis", "--redis-url", "redis://locked:SECRET@" + rs.Addr() + "/0"}, nil, exitFail, "WRONGPASS"},
		{"redis-env", []string{"--backend", "redis"}, map[string]string{"KVBREAKER_REDIS_URL": "redis://:SECRET@" + dead + "/0"}, exitFail, refused},
		{"redis-cluster-refused", []string{"--backend", "redis", "--redis-cluster", "--redis-url", "redis://:SECRET@" + dead + "?addr=" + dead2}, nil, exitFail, refused},
		{"redis-cluster-unparsable", []string{"--backend", "redis", "--redis-cluster", "--redis-url", "redis://:SECRET@bad host:1"}, nil, exitUsage, "--redis-url"},
		{"redis-cluster-wrong-password", []string{"--backend", "redis", "--redis-cluster", "--redis-url", "redis://locked:SECRET@" + rs.Addr()}, nil, exitFail, "WRONGPASS"},
		// PostgreSQL
		{"pg-userinfo-refused", pgArgs("postgres://u:SECRET@" + dead + "/db"), nil, exitFail, refused},
		{"pg-query-refused", pgArgs("postgres://u@" + dead + "/db?password=SECRET"), nil, exitFail, refused},
		{"pg-sslpassword-refused", pgArgs("postgres://u@" + dead + "/db?sslpassword=SECRET"), nil, exitFail, refused},
		{"pg-userinfo-wrong-password", pgArgs("postgres://locked:SECRET@" + pg.Addr() + "/postgres?sslmode=disable"), nil, exitFail, "password authentication failed"},
		{"pg-kv-refused", pgArgs(pgKV(deadPort, "u", "password=SECRET")), nil, exitFail, refused},
		{"pg-kv-wrong-password", pgArgs(pgKV(pgPort, "locked", "password=SECRET")), nil, exitFail, "password authentication failed"},
		{"pg-kv-quoted", pgArgs(pgKV(pgPort, "locked", "password='SECRET with \\' quote'")), nil, exitFail, "password authentication failed"},
		{"pg-kv-spaced", pgArgs(pgKV(pgPort, "locked", "password = SECRET")), nil, exitFail, "password authentication failed"},
		{"pg-kv-bad-port", pgArgs("host=" + pgHost + " password=SECRET port=notaport"), nil, exitUsage, "--postgres-url"},
		{"pg-kv-open-quote", pgArgs("host=" + pgHost + " password='SECRET"), nil, exitUsage, "--postgres-url"},
		{"pg-kv-no-equals", pgArgs("host=" + pgHost + " SECRET"), nil, exitUsage, "--postgres-url"},
		{"pg-url-unparsable", pgArgs("postgres://u:SECRET@bad host/db"), nil, exitUsage, "--postgres-url"},
		{"pg-http-url", pgArgs("http://u:SECRET@" + dead + "/db"), nil, exitUsage, "want a postgres:// URL"},
		{"pg-pgpassword-wrong", pgArgs(pgKV(pgPort, "locked", "")), map[string]string{"PGPASSWORD": "SECRET"}, exitFail, "password authentication failed"},
		{"pg-pgpassword-missing-table", append(pgArgs(pg.URL()), "--postgres-table", "missing"), map[string]string{"PGPASSWORD": "SECRET"}, exitFail, "does not exist"},
		{"pg-env-kv-refused", []string{"--backend", "postgres"}, map[string]string{"KVBREAKER_POSTGRES_URL": pgKV(deadPort, "u", "password=SECRET")}, exitFail, refused},
		{"pg-env-kv-bad-port", []string{"--backend", "postgres"}, map[string]string{"KVBREAKER_POSTGRES_URL": "host=h password=SECRET port=x"}, exitUsage, "(from $KVBREAKER_POSTGRES_URL)"},
		// Bad flags around a secret
		{"misplaced-flag", []string{"--backend", "redis", "--postgres-url", pgKV(pgPort, "u", "password=SECRET")}, nil, exitUsage, "--postgres-url is a postgres flag"},
		{"unknown-flag", append(pgArgs(pgKV(pgPort, "u", "password=SECRET")), "--bogus"), nil, exitUsage, "unknown flag: --bogus"},
		{"unknown-backend", []string{"--backend", "nope"}, map[string]string{"KVBREAKER_POSTGRES_URL": pgKV(pgPort, "u", "password=SECRET")}, exitUsage, `--backend is "nope"`},
		{"bad-env-value", []string{"--backend", "redis"}, map[string]string{"KVBREAKER_REDIS_URL": "redis://:SECRET@" + dead + "/0", "KVBREAKER_REDIS_CLUSTER": "maybe"}, exitUsage, "KVBREAKER_REDIS_CLUSTER"},
		{"negative-timeout", append(pgArgs(pgKV(deadPort, "u", "password=SECRET")), "--timeout", "-1s"), nil, exitUsage, "--timeout"},
	}
	for _, r := range rows {
		for _, command := range []string{"check", "inspect", "reset", "list", "serve", "dashboard"} {
			t.Run(r.name+"/"+command, func(t *testing.T) {
				secret := "sec-" + r.name + "-must-not-show"
				repl := func(s string) string { return strings.ReplaceAll(s, "SECRET", secret) }
				for k, v := range r.env {
					t.Setenv(k, repl(v))
				}
				args := []string{command}
				switch command {
				case "check":
					args = append(args, "--quick", "--quiet")
				case "reset":
					args = append(args, "--yes")
				case "serve", "dashboard":
					// A token, so that serve goes on to the store.
					t.Setenv(tokensEnv, "workers decide,read serve-token-0123456789abcdef")
					args = append(args, "--listen", "127.0.0.1:0")
				}
				for _, a := range r.conn {
					args = append(args, repl(a))
				}
				if command == "inspect" || command == "reset" {
					args = append(args, "x.example")
				}
				var o, e bytes.Buffer
				// serve runs until cancelled: a row that reached no error
				// would end with exit 0 after this, and fail.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				code, err := executeErr(ctx, func() {}, args, &o, &e)
				if code != r.code || !strings.Contains(e.String(), r.want) {
					t.Errorf("exit %d, want %d with %q in stderr\nstdout: %s\nstderr: %s", code, r.code, r.want, o.String(), e.String())
				}
				for where, text := range map[string]string{"stdout": o.String(), "stderr": e.String()} {
					if strings.Contains(text, secret) {
						t.Errorf("%s shows the secret:\n%s", where, text)
					}
				}
				for i, msg := range errorTexts(err) {
					if strings.Contains(msg, secret) {
						t.Errorf("the error (wrapped %d deep, %T) holds the secret: %s", i, unwrapN(err, i), msg)
					}
				}
			})
		}
	}
}

// unwrapN names the error errorTexts found at position i (for messages).
func unwrapN(err error, i int) error {
	var all []error
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		all = append(all, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	if i < len(all) {
		return all[i]
	}
	return errors.New(fmt.Sprint("?", i))
}

func init() {
	// A backend whose library quotes its connection strings in an error,
	// as url.Parse and some drivers do.
	backends["leaky-postgres"] = variant(func(_ context.Context, f *backendFlags) (*conn, error) {
		return nil, fmt.Errorf("driver: cannot use `%s` (env %s)", f.get("postgres-url"), os.Getenv("PGPASSWORD"))
	}, "postgres")
}

// TestScrubLibraryError: the last guard. An error that quotes a
// connection string whole (a library's, not the command's) is printed with
// every credential of the command line and the environment replaced, in
// each position TestSecretsNeverShown covers; the rest of the message
// stays.
func TestScrubLibraryError(t *testing.T) {
	for _, tc := range []struct {
		name, dsn, pgpassword string
		secrets               []string
	}{
		{"url-userinfo", "postgres://u:pw-one-must-not-show@h/db", "", []string{"pw-one-must-not-show"}},
		{"url-escaped", "postgres://u:pw%2Ftwo-must-not-show@h/db", "", []string{"pw%2Ftwo-must-not-show", "pw/two-must-not-show"}},
		{"url-query", "postgres://u@h/db?sslpassword=pw-three-must-not-show&password=pw-four-must-not-show", "", []string{"pw-three-must-not-show", "pw-four-must-not-show"}},
		{"kv", "host=h password=pw-five-must-not-show", "", []string{"pw-five-must-not-show"}},
		{"kv-quoted", `host=h password = 'pw six\'must-not-show'`, "", []string{`pw six'must-not-show`, `pw six\'must-not-show`}},
		{"pgpassword", "host=h", "pw-seven-must-not-show", []string{"pw-seven-must-not-show"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", tc.pgpassword)
			var o, e bytes.Buffer
			code, err := executeErr(context.Background(), func() {}, []string{"inspect", "--backend", "leaky-postgres", "--postgres-url", tc.dsn, "x.example"}, &o, &e)
			if code != exitFail || err == nil || !strings.HasPrefix(e.String(), "Error: driver: cannot use ") {
				t.Fatalf("exit %d, %v\n%s", code, err, e.String())
			}
			for _, s := range tc.secrets {
				if strings.Contains(e.String(), s) {
					t.Errorf("stderr shows %q: %s", s, e.String())
				}
			}
			// Negative control: the error itself quoted it.
			if !strings.Contains(err.Error(), tc.secrets[0]) && !strings.Contains(err.Error(), tc.secrets[len(tc.secrets)-1]) {
				t.Errorf("the leaky backend did not quote the secret: %v", err)
			}
		})
	}
}

// TestRedact: what messages show of a URL or connection string.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:pw@h:1/x?password=pw&a=b":    "http://h:1/x?a=b&password=redacted",
		"https://h/?token=t&X-Amz-Signature=s": "https://h/?X-Amz-Signature=redacted&token=redacted",
		"localhost:8000":                       "localhost:8000",
		"http://u:pw@bad host/":                "http://… (not shown: it does not parse)",
		"u:pw@h:1":                             "… (not shown: it does not parse as a URL)",
		"host=h password=pw":                   "… (not shown: it does not parse as a URL)",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"host=h user=u password=pw dbname=d": "host=h user=u password=redacted dbname=d",
		"host=h password = 'p w\\'x' port=5": "host=h password=redacted port=5",
		"host=h pw":                          "(a keyword/value connection string, not shown: it does not parse)",
		"postgres://u:pw@h/d?password=pw":    "postgres://h/d?password=redacted",
		"just-a-secret":                      "(a connection string, not shown)",
	} {
		if got := redactDSN(in); got != want {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}
