package mysql

import (
	"net"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// cause turns the driver's error into the cause an OpError carries: an
// *driver.UnreachableError when no connection could be made, an
// *adapter.NoAnswerError (naming WithEndpoint's address) when the context
// ended while a statement was out, a *tlsdiag.Error (saying which side must
// change) when the TLS handshake failed, and otherwise err itself.
func (s *Store) cause(err error) error {
	if te := tlsdiag.Classify("mysql", s.tlsEndpoint(), err); te != nil {
		te.Fix += ", in the tls.Config registered with mysql.RegisterTLSConfig and named by tls= in the DSN"
		return te
	}
	if dial, ok := adapter.DialFailed(err); ok {
		return &driver.UnreachableError{Backend: "mysql", Endpoints: []string{s.dialedAt(dial)}, Reason: adapter.DialReason(dial), Err: err}
	}
	return adapter.NoAnswer("mysql", s.endpoint, err)
}

// tlsEndpoint names the server a handshake failed with: WithEndpoint's
// address, else "its address" (the driver's error does not carry it).
func (s *Store) tlsEndpoint() string {
	if s.endpoint != "" {
		return s.endpoint
	}
	return "its address"
}

// dialedAt names where a failed dial went: WithEndpoint's address, else
// the dial's own.
func (s *Store) dialedAt(dial error) string {
	if s.endpoint != "" {
		return s.endpoint
	}
	if op, ok := dial.(*net.OpError); ok && op.Addr != nil {
		return op.Addr.String()
	}
	if dns, ok := dial.(*net.DNSError); ok {
		return dns.Name
	}
	return "its address"
}
