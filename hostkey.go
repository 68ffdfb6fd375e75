//go:build !kvbreaker_nohostkey

// The tag kvbreaker_nohostkey leaves HostKey out, and with it
// golang.org/x/net/idna, golang.org/x/text's tables and net/url: make demo
// builds the simulator with it, which never normalises a URL, so that its
// first run neither downloads those two modules nor compiles them. Every
// other build, a user's included, has HostKey.

package kvbreaker

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
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
//
// It accepts the names Go's resolver and net/http do: letters, digits, '-'
// and '_' ("_dmarc.example.com"), after IDNA mapping. A port is a number
// from 1 to 65535, written without leading zeros in the key (":0443" is
// 443).
func HostKey(rawURL string) (string, error) {
	s := strings.TrimSpace(rawURL)
	if !strings.Contains(s, "://") {
		s = "//" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: %v", driver.ErrInvalidKey, err)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return "", fmt.Errorf("%w: no host in %q", driver.ErrInvalidKey, rawURL)
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	} else {
		host = strings.TrimSuffix(host, ".")
		if host, err = lookup.ToASCII(host); err != nil {
			return "", fmt.Errorf("%w: host %q: %v", driver.ErrInvalidKey, u.Hostname(), err)
		}
		if err := dialable(host); err != nil {
			return "", fmt.Errorf("%w: host %q: %v", driver.ErrInvalidKey, u.Hostname(), err)
		}
	}
	if port != "" {
		// url.Parse checks only that the port is digits: ":0443" is
		// port 443 to a dialer, and ":99999" is no port at all.
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return "", fmt.Errorf("%w: port %q in %q: want 1 to 65535", driver.ErrInvalidKey, port, rawURL)
		}
		port = strconv.FormatUint(n, 10)
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

// lookup is idna.Lookup without the STD3 rules, which refuse the '_' that
// Go's resolver and net/http accept ("_dmarc.example.com",
// "my_site.example.com"); dialable then allows only what the resolver does.
var lookup = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.StrictDomainName(false), idna.Transitional(false))

// dialable checks an ASCII host name as Go's resolver does (net's
// isDomainName): labels of letters, digits, '-' and '_', 1 to 63 bytes,
// none starting or ending with '-', at most 253 bytes in all.
func dialable(host string) error {
	if len(host) == 0 || len(host) > 253 {
		return fmt.Errorf("name of %d bytes: want 1 to 253", len(host))
	}
	for label := range strings.SplitSeq(host, ".") {
		switch {
		case label == "" || len(label) > 63:
			return fmt.Errorf("label %q: want 1 to 63 bytes", label)
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q: %q is not a letter, digit, '-' or '_'", label, c)
			}
		}
	}
	return nil
}
