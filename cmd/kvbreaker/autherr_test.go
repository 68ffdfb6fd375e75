package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// authPassword is the password the servers below require; no output may
// show it.
const authPassword = "s3cret-auth-must-not-show"

// TestRedisAuthErrors: a Redis that requires a password, asked without
// one, with a wrong one and for a database it does not have: each error
// names the server and the flag that fixes it, never the password; the
// driver's own errors ("redis: dial: NOAUTH Authentication required." and
// the like) name neither.
func TestRedisAuthErrors(t *testing.T) {
	srv := redistest.MustStart(t)
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	if err := cli.ConfigSet(context.Background(), "requirepass", authPassword).Err(); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	at := "redis at " + srv.Addr()
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{srv.URL(), []string{at + " db 0 requires a password", "NOAUTH", "--redis-url", "$KVBREAKER_REDIS_URL"}},
		{"redis://:wrong-password@" + srv.Addr() + "/0", []string{at + " db 0 refused the user name or password in --redis-url", "WRONGPASS"}},
		{"redis://:" + authPassword + "@" + srv.Addr() + "/99", []string{at + " db 99: the server has no such database", "--redis-url's path"}},
	} {
		code, out, errOut := runT(t, "inspect", "--backend", "redis", "--redis-url", tc.url, "x.example")
		if code != exitFail {
			t.Errorf("exit %d, want %d\n%s%s", code, exitFail, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("stderr lacks %q:\n%s", w, errOut)
			}
		}
		if strings.Contains(out+errOut, authPassword) || strings.Contains(out+errOut, "wrong-password") {
			t.Errorf("output shows a password:\n%s%s", out, errOut)
		}
	}
	code, out, errOut := runT(t, "inspect", "--backend", "redis", "--redis-url", "redis://:"+authPassword+"@"+srv.Addr()+"/0", "x.example")
	if code != exitOK {
		t.Errorf("with the password: exit %d\n%s%s", code, out, errOut)
	}
}

// TestPostgresAuthErrors: a PostgreSQL that wants a password (scram) for
// user app: no password, a wrong one, a missing database and a missing
// role each name the server, what it said and the flag or variable that
// fixes it, with no "tls error" line above the server's answer (pgx's
// sslmode=prefer tries TLS first) and no password.
func TestPostgresAuthErrors(t *testing.T) {
	pg := pgtest.MustStart(t)
	c, err := pgx.Connect(t.Context(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), "CREATE ROLE app LOGIN PASSWORD '"+authPassword+"'"); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(pg.DataDir(), "pg_hba.conf")
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hba, append([]byte("host all app 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	c.Close(t.Context())
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", os.DevNull)
	at := "postgres at " + pg.Addr()
	for _, tc := range []struct {
		url  string
		env  string // $PGPASSWORD
		want []string
	}{
		{"postgres://app@" + pg.Addr() + "/postgres", "", []string{at + ` wants a password for user "app" and none was given`, "28P01", "$PGPASSWORD", "~/.pgpass"}},
		{"postgres://app@" + pg.Addr() + "/postgres", "wrong-password", []string{at + ` refused the password of user "app"`, "$PGPASSWORD"}},
		{"postgres://app:wrong-password@" + pg.Addr() + "/postgres", "", []string{at + ` refused the password of user "app"`, "--postgres-url"}},
		{"postgres://app@" + pg.Addr() + "/nodb", authPassword, []string{at + ` has no database "nodb"`, "3D000", "--postgres-url", "$PGDATABASE"}},
		{"postgres://nobody@" + pg.Addr() + "/postgres", "", []string{at + ` refused user "nobody"`, `role "nobody" does not exist`, "$PGUSER"}},
	} {
		t.Setenv("PGPASSWORD", tc.env)
		code, out, errOut := runT(t, "inspect", "--backend", "postgres", "--postgres-url", tc.url, "x.example")
		if code != exitFail {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.url, code, exitFail, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.url, w, errOut)
			}
		}
		for _, bad := range []string{"tls error", authPassword, "wrong-password"} {
			if strings.Contains(out+errOut, bad) {
				t.Errorf("%s: output shows %q:\n%s%s", tc.url, bad, out, errOut)
			}
		}
	}
	t.Setenv("PGPASSWORD", authPassword)
	code, _, errOut := runT(t, "inspect", "--backend", "postgres", "--postgres-url", "postgres://app@"+pg.Addr()+"/postgres", "x.example")
	if code != exitFail || !strings.Contains(errOut, "table kvbreaker does not exist") {
		t.Errorf("with the password: exit %d, want the missing table: %s", code, errOut)
	}
}
