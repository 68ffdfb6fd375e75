package postgres_test

import (
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

const secret = "s3cr3tPW"

// secretConnStrings carry secret in every position a connection string can,
// each with something wrong (or a refused port, dead).
func secretConnStrings(dead string) []struct{ name, conn string } {
	return []struct{ name, conn string }{
		{"userinfo, bad port", "postgres://u:" + secret + "@127.0.0.1:bad/db"},
		{"userinfo, bad escape", "postgres://u:" + secret + "%zz@127.0.0.1/db"},
		{"userinfo with a slash", "postgres://u:" + secret + "/x@127.0.0.1/db"},
		{"userinfo as the port", "postgres://u:" + secret + "/db"},
		{"userinfo, bad sslmode", "postgresql://u:" + secret + "@127.0.0.1/db?sslmode=bogus"},
		{"password= query, bad port", "postgres://127.0.0.1/db?password=" + secret + "&port=bad"},
		{"password= query, bad pool option", "postgres://127.0.0.1/db?pool_max_conns=x&password=" + secret},
		{"sslpassword= query", "postgres://127.0.0.1/db?sslmode=bogus&sslpassword=" + secret},
		{"fragment", "postgres://127.0.0.1:bad/db#" + secret},
		{"keyword/value", "host=127.0.0.1 port=bad password=" + secret},
		{"keyword/value, spaces around =", "host=127.0.0.1 port=bad password = " + secret},
		{"keyword/value, quoted", "host=127.0.0.1 port=bad password='" + secret + " x'"},
		{"keyword/value, escaped quote", `host=127.0.0.1 port=bad password='a\'` + secret + `'`},
		{"keyword/value, refused", "host=127.0.0.1 port=" + portOf(dead) + " user=u password=" + secret + " sslmode=disable"},
		{"userinfo, refused", "postgres://u:" + secret + "@" + dead + "/db?sslmode=disable"},
		{"password= query, refused", "postgres://u@" + dead + "/db?sslmode=disable&password=" + secret},
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestParseConfigHidesSecrets: whatever is wrong with a connection string,
// ParseConfig's error never shows its secret, which pgxpool.ParseConfig's
// does for "password = secret".
func TestParseConfigHidesSecrets(t *testing.T) {
	for _, tc := range secretConnStrings("127.0.0.1:1") {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgres.ParseConfig(tc.conn)
			if strings.HasSuffix(tc.name, "refused") {
				if err != nil {
					t.Fatalf("ParseConfig(%q) = %v", tc.conn, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseConfig(%q) succeeded", tc.conn)
			}
			if msg := err.Error(); strings.Contains(msg, secret[:5]) {
				t.Fatalf("ParseConfig's error shows the secret: %v", msg)
			}
			t.Log(err)
		})
	}
}

// TestStoreErrorsHideSecrets: a store over a pool whose connection string
// carries a password reports a refused server without it.
func TestStoreErrorsHideSecrets(t *testing.T) {
	dead := backendtest.ClosedPort(t)
	for _, tc := range secretConnStrings(dead) {
		if !strings.HasSuffix(tc.name, "refused") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := postgres.ParseConfig(tc.conn)
			if err != nil {
				t.Fatal(err)
			}
			pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			st, err := postgres.New(pool, table)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, err := range []error{st.Ping(t.Context()), func() error { _, _, err := st.Get(t.Context(), "k"); return err }()} {
				if err == nil {
					t.Fatal("a call to a refused port succeeded")
				}
				if msg := err.Error(); strings.Contains(msg, secret[:5]) {
					t.Fatalf("the store's error shows the secret: %v", msg)
				}
				t.Log(err)
			}
		})
	}
}
