package kvbreaker

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/kvbreaker/kvbreaker/driver"
	"golang.org/x/net/idna"
)

// HostKey returns the per-host key for a delivery URL: the host in lower
// case, internationalised names in their ASCII (IDNA) form, and the port kept
// unless it is the scheme's default ("https://Bücher.example:443/inbox" ⇒
// "xn--bcher-kva.example"; "http://example.com:8080/" ⇒ "example.com:8080").
//
// The default ports dropped are 80 for http and ws, and 443 for https and
// wss, so "wss://host:443" and "wss://host" are one host. For any other
// scheme (smtp, a custom one) and for a bare "host:port", an explicit port is
// always kept: HostKey cannot know the scheme's default, and a port written
// out may be a different service. A bare "host" is accepted too.
func HostKey(rawURL string) (string, error) {
	s := strings.TrimSpace(rawURL)
	if !strings.Contains(s, "://") {
		s = "//" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", fmt.Errorf("%w: no host in %q", ErrInvalidKey, rawURL)
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	} else {
		host = strings.TrimSuffix(host, ".")
		if host, err = idna.Lookup.ToASCII(host); err != nil {
			return "", fmt.Errorf("%w: host %q: %v", ErrInvalidKey, u.Hostname(), err)
		}
	}
	switch {
	case port == "", port == defaultPorts[strings.ToLower(u.Scheme)]:
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	default:
		host = net.JoinHostPort(host, port)
	}
	return host, driver.ValidateKey(host)
}

// defaultPorts are the schemes whose default port HostKey drops.
var defaultPorts = map[string]string{"http": "80", "ws": "80", "https": "443", "wss": "443"}
