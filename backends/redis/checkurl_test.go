package redis_test

import (
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/redis"
)

// TestCheckURLRefusesInWords: URLs Dial and DialCluster take pass; each
// refusal says why and never shows the password.
func TestCheckURLRefusesInWords(t *testing.T) {
	const pw = "s3cret-pw"
	for _, c := range []struct {
		url     string
		cluster bool
		want    string // "" passes
	}{
		{"redis://:" + pw + "@h:6379/2", false, ""},
		{"rediss://u:" + pw + "@h:6380/0", false, ""},
		{"redis://:" + pw + "@h:6379?addr=h2:6379", true, ""},
		{"redis://:" + pw + "@h:6379?master_name=m", false, "master_name= names a Redis Sentinel master"},
		{"redis://:" + pw + "@h:6379?addr=h2:6379", false, "addr= names the seeds of a Redis Cluster: add -c"},
		{"redis://:" + pw + "@h:6379/3", true, `database 0 only: drop "/3" (with -c)`},
		{"redis://h:6379?read_only=true", true, "send reads to replicas"},
		{"http://:" + pw + "@h:6379/0", false, "want redis://host:port/db"},
		{"redis://:" + pw + "@h x:6379/0", false, `invalid character " " in host name`},
		{"redis://:" + pw + "@h x:6379", true, "with -c want redis://host:port?addr="},
	} {
		err := redis.CheckURL(c.url, c.cluster, "-c")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckURL(%q, %v) = %v, want it to pass", c.url, c.cluster, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckURL(%q, %v) = %v, want %q in it", c.url, c.cluster, err, c.want)
		case err != nil && strings.Contains(err.Error(), pw):
			t.Errorf("CheckURL(%q, %v) shows the password: %v", c.url, c.cluster, err)
		}
	}
}
