package nats_test

import (
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/nats"
)

// TestCheckURLRefusesInWords: the test server's URL and tls:// pass; a URL
// of another scheme or without a host is refused without being shown.
func TestCheckURLRefusesInWords(t *testing.T) {
	const pw = "s3cret-pw"
	for _, c := range []struct {
		url  string
		pass bool
	}{
		{server.URL(), true},
		{"tls://u:" + pw + "@nats-1:4222", true},
		{"http://u:" + pw + "@nats-1:4222", false},
		{"nats://u:" + pw + "@:4222", false},
		{"nats-1:4222", false},
	} {
		err := nats.CheckURL(c.url)
		if (err == nil) != c.pass || (err != nil && (!strings.Contains(err.Error(), "want nats://host:4222") || strings.Contains(err.Error(), pw))) {
			t.Errorf("CheckURL(%q) = %v, want pass %v, or the wanted form without the password", c.url, err, c.pass)
		}
	}
}
