package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/tlsdiag"
)

// cause turns pgx's error into the cause an OpError carries: an
// *driver.UnreachableError when no connection could be made, an
// *adapter.NoAnswerError when the context ended while a statement was out,
// and otherwise err itself.
func (s *Store) cause(err error) error {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		if te := tlsdiag.Classify("postgres", s.endpoint, err); te != nil {
			te.Fix = tlsFix(te.Kind, "the connection string")
			return te
		}
		// Err stays pgx's error, so errors.As still finds the ConnectError.
		if dial, ok := adapter.DialFailed(err); ok {
			return &driver.UnreachableError{Backend: "postgres", Endpoints: []string{s.endpoint}, Reason: adapter.DialReason(dial), Err: err}
		}
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == insufficientPrivilege {
		return &PrivilegeError{Role: s.role, Table: s.table, Err: err}
	}
	return adapter.NoAnswer("postgres", s.endpoint, err)
}

// tlsFix is what fixes a TLS mismatch of kind, in libpq's terms (which
// pgx's connection strings and the PG* variables share), naming setting
// where the connection string is to change.
func tlsFix(kind tlsdiag.Problem, setting string) string {
	switch kind {
	case tlsdiag.Untrusted:
		return "give the authority that signed it as sslrootcert= in " + setting + " (postgres://…?sslmode=verify-full&sslrootcert=ca.pem) or $PGSSLROOTCERT"
	case tlsdiag.WrongName:
		return "connect by a host name or address the certificate holds (sslmode=verify-full checks it)"
	case tlsdiag.InvalidCert:
		return "renew the server's certificate, or check this machine's clock"
	case tlsdiag.ClientCertRefused:
		return "give a client certificate and key the server's authority signed as sslcert= and sslkey= in " + setting + " (or $PGSSLCERT, $PGSSLKEY)"
	case tlsdiag.ServerPlain:
		return "the server has ssl=off: turn it on, or connect with sslmode=disable in " + setting
	case tlsdiag.ServerSpeaksTLS:
		return "connect with sslmode=verify-full and sslrootcert= in " + setting
	}
	return ""
}

// insufficientPrivilege is PostgreSQL's SQLSTATE 42501.
const insufficientPrivilege = "42501"

// PrivilegeError is a statement the server refused because the role lacks a
// privilege on the store's table or its version sequence (SQLSTATE 42501).
// It unwraps to pgx's *pgconn.PgError.
type PrivilegeError struct {
	// Role is the role the pool connects as; Table the store's table.
	Role, Table string
	// Err is the server's refusal.
	Err error
}

func (e *PrivilegeError) Error() string {
	said := e.Err.Error()
	if pe, ok := errors.AsType[*pgconn.PgError](e.Err); ok {
		said = pe.Message
	}
	return fmt.Sprintf("role %q lacks a privilege on table %s (%s): its owner can GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %q and GRANT USAGE ON SEQUENCE %s TO %q",
		e.Role, quoteIdent(e.Table), said, quoteIdent(e.Table), e.Role, quoteIdent(e.Table+seqSuffix), e.Role)
}

// Unwrap returns the server's refusal.
func (e *PrivilegeError) Unwrap() error { return e.Err }
