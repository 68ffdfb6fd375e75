package tlsdiag

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadFilesSaysWhichFile: no file is no TLS; a missing CA file, a CA
// file without a PEM certificate and a key pair that does not load are
// each a *FileError naming the file, never quoting what it holds.
func TestLoadFilesSaysWhichFile(t *testing.T) {
	if cfg, err := LoadFiles("", "", ""); cfg != nil || err != nil {
		t.Fatalf("LoadFiles of no file = %v, %v; want nil, nil", cfg, err)
	}
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("SECRET-CONTENTS"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ca, cert, key string
		clientCert    bool
		want          string
	}{
		{filepath.Join(dir, "none.pem"), "", "", false, "none.pem"},
		{notPEM, "", "", false, notPEM + ": no PEM certificate in it"},
		{"", notPEM, notPEM, true, ""},
	} {
		_, err := LoadFiles(c.ca, c.cert, c.key)
		fe, ok := errors.AsType[*FileError](err)
		if !ok || fe.ClientCert != c.clientCert || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("LoadFiles(%q, %q, %q) = %v, want a *FileError (ClientCert %v) saying %q without the file's contents", c.ca, c.cert, c.key, err, c.clientCert, c.want)
		}
	}
}
