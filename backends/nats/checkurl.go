package nats

import (
	"errors"
	"net/url"
)

// CheckURL checks one of the server URLs Dial takes (nats://host:4222 or
// tls://host:4222) without connecting, for a tool that validates its
// settings before it dials. The error does not quote the URL, whose user
// information may authenticate.
func CheckURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "" {
		return errors.New("want nats://host:4222 or tls://host:4222 (comma-separated for several)")
	}
	return nil
}
