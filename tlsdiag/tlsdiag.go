// Package tlsdiag names why a TLS (or plain-text) connection to a store
// failed and what fixes it, for adapters and the command: it classifies a
// handshake's error, probes a server whose client only reports a timeout,
// and watches for a client certificate a server asked for and did not get.
// It is a package of its own, not part of driver (the contract), so that a
// program that uses no TLS store (the simulator, an in-memory fleet) does
// not compile crypto/tls and crypto/x509.
package tlsdiag

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Error says why a TLS connection to a store failed and what fixes it:
// "TLS with etcd at https://10.0.0.1:2379 failed: the server's certificate
// is signed by an authority the client does not trust (\"etcd CA\"): give
// the client the authority that signed it (tls.Config.RootCAs)". Adapters
// return it as the cause of a *OpError; it unwraps to the handshake's
// error (x509.UnknownAuthorityError, x509.HostnameError, …). A command
// that sets the TLS configuration from flags can say Fix in its own terms
// with errors.As.
type Error struct {
	// Backend names the store as the message does ("etcd", "redis").
	Backend string
	// Endpoint is where the client connected, without credentials.
	Endpoint string
	// Kind says which side must change (Untrusted, …).
	Kind Problem
	// Reason is what happened, in a few words.
	Reason string
	// Fix is what to change, in terms of the library's crypto/tls
	// configuration.
	Fix string
	// Err is the handshake's error.
	Err error
}

// Problem classifies an Error.
type Problem int

const (
	// Untrusted: the server's certificate is signed by an authority
	// the client does not trust (or is self-signed).
	Untrusted Problem = iota + 1
	// WrongName: the server's certificate is not for the name the
	// client connected to.
	WrongName
	// InvalidCert: the server's certificate has expired, is not valid
	// yet, or may not serve TLS.
	InvalidCert
	// ClientCertRefused: the server requires a client certificate and
	// got none, or refused the one it got.
	ClientCertRefused
	// ServerPlain: the client speaks TLS, the server plain text.
	ServerPlain
	// ServerSpeaksTLS: the client speaks plain text, the server TLS.
	ServerSpeaksTLS
)

func (e *Error) Error() string {
	s := "TLS with " + e.Backend + " at " + e.Endpoint + " failed: " + e.Reason
	if e.Fix != "" {
		s += ": " + e.Fix
	}
	return s
}

// Unwrap returns the handshake's error.
func (e *Error) Unwrap() error { return e.Err }

// Classify returns a *Error for backend at endpoint if err is a TLS
// handshake failure it recognises (an untrusted, misnamed or invalid server
// certificate, a client certificate the server requires or refuses, a
// server that answers in plain text), or nil.
func Classify(backend, endpoint string, err error) *Error {
	if err == nil {
		return nil
	}
	e := &Error{Backend: backend, Endpoint: endpoint, Err: err}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &ua):
		e.Kind = Untrusted
		e.Reason = "the server's certificate is signed by an authority the client does not trust"
		if ua.Cert != nil && ua.Cert.Issuer.CommonName != "" {
			e.Reason += " (" + quote(ua.Cert.Issuer.CommonName) + ")"
		}
		e.Fix = "give the client the authority that signed it (tls.Config.RootCAs)"
	case errors.As(err, &hn):
		e.Kind = WrongName
		e.Reason = "the server's certificate is not for the name the client connected to (" + hn.Error() + ")"
		e.Fix = "connect by a name or address the certificate holds, or set tls.Config.ServerName to one"
	case errors.As(err, &ci):
		e.Kind = InvalidCert
		e.Reason = "the server's certificate is not valid (" + ci.Error() + ")"
		e.Fix = "renew the server's certificate, or check this machine's clock"
	case errors.As(err, &rh):
		e.Kind = ServerPlain
		e.Reason = "the server does not speak TLS (its first bytes are not a TLS record)"
		e.Fix = "connect without TLS, or turn TLS on at the server"
	case remoteAlert(err, "certificate required", "bad certificate", "unknown certificate authority", "certificate unknown"):
		e.Kind = ClientCertRefused
		e.Reason = "the server requires a client certificate its authority signed and refused this connection's (" + alertText(err) + ")"
		e.Fix = "give the client a certificate and key the server's authority signed (tls.Config.Certificates)"
	default:
		return nil
	}
	return e
}

// remoteAlert reports whether err is a TLS alert from the peer (crypto/tls
// reports those as a *net.OpError of Op "remote error", whose alert type is
// unexported) naming one of alerts.
func remoteAlert(err error, alerts ...string) bool {
	op, ok := errors.AsType[*net.OpError](err)
	if !ok || op.Op != "remote error" || op.Err == nil {
		return false
	}
	for _, a := range alerts {
		if strings.HasSuffix(op.Err.Error(), a) {
			return true
		}
	}
	return false
}

func alertText(err error) string {
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Err != nil {
		return "its alert: " + op.Err.Error()
	}
	return err.Error()
}

func quote(s string) string { return `"` + s + `"` }

// Probe diagnoses why a store's TLS (or plain-text) connection to addr
// (host:port) fails when its client only says that no answer came (as
// etcd's client does, retrying the handshake until the context ends). With
// cfg it completes a handshake as the client would and reads briefly, for
// a refusal of the client certificate that TLS 1.3 sends after the
// handshake; without cfg (a plain-text client) it checks whether the server
// speaks TLS. It returns a *Error naming the problem, or nil when it
// finds none (or cannot tell within ctx).
func Probe(ctx context.Context, backend, endpoint, addr string, cfg *tls.Config) *Error {
	d := &net.Dialer{}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	if cfg == nil {
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, ServerName: hostOf(addr)}) // only asks whether the server speaks TLS
		if c.HandshakeContext(ctx) != nil {
			return nil
		}
		return &Error{Backend: backend, Endpoint: endpoint, Kind: ServerSpeaksTLS,
			Reason: "the server speaks TLS and the client plain text",
			Fix:    "connect with TLS, trusting the authority that signed the server's certificate"}
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = hostOf(addr)
	}
	// etcd's client offers HTTP/2 (gRPC); a server that requires it
	// refuses a handshake that offers nothing.
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2"}
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return Classify(backend, endpoint, err)
	}
	// A TLS 1.3 server checks the client's certificate after the client's
	// handshake ends and says so in an alert: wait briefly for one.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	return Classify(backend, endpoint, err)
}

// CertWatch records whether a server asked, in a handshake made with the
// configuration WatchClientCert returned, for a client certificate that
// configuration had none to give for. A TLS 1.3 server checks the client's
// certificate after the client's handshake has ended and refuses it in an
// alert; a client that has already sent its first request may never read
// that alert, since a server that closes a connection with the request
// unread makes the kernel send a reset, which discards it. The watch names
// the refusal whatever the timing.
type CertWatch struct{ unmet atomic.Bool }

// WatchClientCert returns a clone of cfg whose handshakes w watches, and
// which offers the same certificate cfg would: cfg's GetClientCertificate
// if set, else the first of cfg.Certificates the server accepts, else none.
func WatchClientCert(cfg *tls.Config) (_ *tls.Config, w *CertWatch) {
	w = &CertWatch{}
	cfg = cfg.Clone()
	get, certs := cfg.GetClientCertificate, cfg.Certificates
	cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if get != nil {
			c, err := get(cri)
			if err == nil && (c == nil || len(c.Certificate) == 0) {
				w.unmet.Store(true)
			}
			return c, err
		}
		for i := range certs {
			if cri.SupportsCertificate(&certs[i]) == nil {
				return &certs[i], nil
			}
		}
		w.unmet.Store(true)
		return &tls.Certificate{}, nil
	}
	return cfg, w
}

// Refused returns a *Error of kind ClientCertRefused for backend at
// endpoint when err is a connection the server closed (a reset or an end
// of stream) after it asked for a client certificate the client had none
// to give for, and nil otherwise (a nil w too). An err Classify
// recognises is classified by it first.
func (w *CertWatch) Refused(backend, endpoint string, err error) *Error {
	if err == nil {
		return nil
	}
	if te := Classify(backend, endpoint, err); te != nil {
		return te
	}
	if w == nil || !w.unmet.Load() {
		return nil
	}
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return &Error{Backend: backend, Endpoint: endpoint, Kind: ClientCertRefused, Err: err,
		Reason: "the server requires a client certificate and closed the connection, having asked for one the client did not have (" + err.Error() + ")",
		Fix:    "give the client a certificate and key the server's authority signed (tls.Config.Certificates)"}
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
