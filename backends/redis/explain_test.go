package redis

import (
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// serverReply is a reply a Redis server sends as an error (goredis.Error).
type serverReply string

func (e serverReply) Error() string { return string(e) }
func (serverReply) RedisError()     {}

var _ goredis.Error = serverReply("")

// TestExplainNamesTheSettingAndKeepsTheError: each refusal a server gives
// is explained with the setting the caller named (or "the URL") and still
// unwraps to the server's reply; any other error is only prefixed.
func TestExplainNamesTheSettingAndKeepsTheError(t *testing.T) {
	for _, reply := range []string{
		"NOAUTH Authentication required.",
		"WRONGPASS invalid username-password pair or user is disabled.",
		"NOPERM User app has no permissions to run the 'hset' command",
		"ERR DB index is out of range",
	} {
		for _, setting := range []string{"$REDIS_URL", ""} {
			got := Explain(serverReply(reply), "redis at r.invalid:6379 db 0", setting)
			named := setting
			if named == "" {
				named = "the URL"
			}
			msg := got.Error()
			if !strings.HasPrefix(msg, "redis at r.invalid:6379 db 0") || !strings.Contains(msg, reply) || !strings.Contains(msg, named) {
				t.Errorf("%q, setting %q: %q", reply, setting, msg)
			}
			if _, ok := errors.AsType[goredis.Error](got); !ok {
				t.Errorf("%q does not unwrap to the server's reply", msg)
			}
		}
	}
	// A reply that no setting fixes, and an error that is no reply, are
	// returned with where in front.
	for _, err := range []error{serverReply("BUSY script running"), errors.New("connection reset by peer")} {
		if got := Explain(err, "redis at r.invalid:6379 db 0", "--redis-url"); got.Error() != "redis at r.invalid:6379 db 0: "+err.Error() || !errors.Is(got, err) {
			t.Errorf("%v: %q", err, got)
		}
	}
}
