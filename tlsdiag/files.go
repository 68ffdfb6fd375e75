package tlsdiag

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// FileError is LoadFiles's error: which file could not be used, and why.
type FileError struct {
	// ClientCert: the client certificate and key pair failed; otherwise
	// the CA file.
	ClientCert bool
	// Err names the file, never its contents.
	Err error
}

func (e *FileError) Error() string { return e.Err.Error() }

// Unwrap returns the cause (an *os.PathError, or crypto/tls's error).
func (e *FileError) Unwrap() error { return e.Err }

// LoadFiles builds a client's TLS configuration (TLS 1.2 or later) from PEM
// files: caFile, the authority that signed the server's certificate (the
// system's pool when ""), and certFile with keyFile, a client certificate
// for mutual TLS (none when certFile is ""). It returns nil and no error
// when caFile and certFile are both "": no TLS asked for. Its errors are
// *FileError values.
func LoadFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, &FileError{Err: err}
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &FileError{Err: fmt.Errorf("%s: no PEM certificate in it", caFile)}
		}
	}
	if certFile != "" {
		// LoadX509KeyPair's errors name the files, never their contents.
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, &FileError{ClientCert: true, Err: err}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
