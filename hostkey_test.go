package kvbreaker

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/driver"
)

func TestHostKey(t *testing.T) {
	cases := []struct{ in, want string }{
		{"https://Inbox.Example.COM/users/a/inbox", "inbox.example.com"},
		{"https://example.com:443/", "example.com"},
		{"http://example.com:80/x", "example.com"},
		{"https://example.com:80/", "example.com:80"},
		{"http://example.com:8080/", "example.com:8080"},
		{"https://Bücher.example/inbox", "xn--bcher-kva.example"},
		{"https://example.com./", "example.com"},
		{"https://[2001:DB8::1]:8443/", "[2001:db8::1]:8443"},
		{"https://[2001:db8::1]/", "[2001:db8::1]"},
		{"smtp.example.org:587", "smtp.example.org:587"},
		{"Example.org", "example.org"},
		{"https://user:secret@example.net/", "example.net"},
		// ws and wss share http's and https's default ports; other schemes keep an
		// explicit port (HostKey cannot know their default).
		{"wss://relay.example:443/stream", "relay.example"},
		{"wss://relay.example/stream", "relay.example"},
		{"ws://relay.example:80/", "relay.example"},
		{"ws://relay.example:443/", "relay.example:443"},
		{"wss://relay.example:80/", "relay.example:80"},
		{"HTTPS://Example.com:443/", "example.com"},
		{"smtp://mail.example:25", "mail.example:25"},
		// What net/http dials: underscores, and ports as numbers.
		{"https://my_site.example.com/inbox", "my_site.example.com"},
		{"https://_dmarc.example.com/", "_dmarc.example.com"},
		{"https://example.com:0443/", "example.com"},
		{"http://example.com:080/", "example.com"},
		{"https://example.com:08443/", "example.com:8443"},
		{"example.com:65535", "example.com:65535"},
		{"https://Bücher_Shop.example/", "xn--bcher_shop-9db.example"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := HostKey(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("HostKey(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestHostKeyRejects(t *testing.T) {
	for _, in := range []string{"", "https:///path", "https://exa mple.com/", "https://" + strings.Repeat("a", 300) + ".com/", "http://a\x00b/", "https://xn--/",
		"https://example.com:99999/", "https://example.com:0/", "https://example.com:65536/", "example.com:00",
		"https://-a.example/", "https://a-.example/", "https://a*b.example/", "https://a!b.example/", "https://" + strings.Repeat("a", 64) + ".example/",
		"https://a..b.example/",
		// IDNA errors whose partial output would pass as a name.
		"https://xn--a.example/", "https://a\u200db.example/", "https://a\u05d0.example/"} {
		if got, err := HostKey(in); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("HostKey(%q) = %q, %v; want driver.ErrInvalidKey", in, got, err)
		}
	}
}

func FuzzHostKey(f *testing.F) {
	f.Add("https://Bücher.example:8443/inbox")
	f.Fuzz(func(t *testing.T, in string) {
		k, err := HostKey(in)
		if err != nil {
			return
		}
		if err := driver.ValidateKey(k); err != nil {
			t.Fatalf("HostKey(%q) = %q, which is not a valid key: %v", in, k, err)
		}
	})
}

// TestValidateKeyCases: ValidateKey's printable-ASCII shortcut and its rune
// loop agree on the edges between them.
func TestValidateKeyCases(t *testing.T) {
	for k, valid := range map[string]bool{
		"": false, "inbox.example": true, "a b": true, "~!@#$%^&*()": true, "tab\there": false, "del\x7f": false,
		"nul\x00": false, "é.example": true, "\ufffd": true, "bad\xff": false, "c1\u0085": false,
		strings.Repeat("a", driver.MaxKeyLen): true, strings.Repeat("a", driver.MaxKeyLen+1): false,
	} {
		if got := driver.ValidateKey(k) == nil; got != valid {
			t.Errorf("driver.ValidateKey(%q) valid = %v, want %v", k, got, valid)
		}
	}
}
