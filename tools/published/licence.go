package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/licensecheck"
	"golang.org/x/mod/module"
)

// wantLicence is the licence every module carries (LICENSE at each
// module's root).
const wantLicence = "Apache-2.0"

// licenceFileNames are the names pkg.go.dev looks for, compared without
// case, at a module's root (pkgsite's internal/licenses.FileNames).
var licenceFileNames = []string{
	"COPYING", "COPYING.md", "COPYING.markdown", "COPYING.txt",
	"LICENCE", "LICENCE.md", "LICENCE.markdown", "LICENCE.txt",
	"LICENSE", "LICENSE.md", "LICENSE.markdown", "LICENSE.txt",
	"LICENSE-2.0.txt", "LICENCE-2.0.txt",
	"LICENSE-APACHE", "LICENCE-APACHE", "LICENSE-APACHE-2.0.txt", "LICENCE-APACHE-2.0.txt",
	"LICENSE-MIT", "LICENCE-MIT", "LICENSE.MIT", "LICENCE.MIT",
	"LICENSE.code", "LICENCE.code", "LICENSE.docs", "LICENCE.docs",
	"LICENSE.rst", "LICENCE.rst",
	"MIT-LICENSE", "MIT-LICENCE", "MIT-LICENSE.md", "MIT-LICENCE.md",
	"MIT-LICENSE.markdown", "MIT-LICENCE.markdown", "MIT-LICENSE.txt", "MIT-LICENCE.txt",
	"MIT_LICENSE", "MIT_LICENCE", "UNLICENSE", "UNLICENCE",
}

// licenceCoverage is pkg.go.dev's threshold: below this share of a
// file's words matching a known licence, it shows no documentation.
const licenceCoverage = 75

// checkLicence fails unless the module zip z of mv has, at its root, a file
// pkg.go.dev takes for a licence (a name it looks for, a text licensecheck
// matches over at least licenceCoverage percent) whose licence is
// wantLicence. A licence elsewhere in the zip, or only at the repository's
// root for a nested module, does not count: pkg.go.dev reads the zip.
func checkLicence(z []byte, mv module.Version) (string, error) {
	r, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return "", fmt.Errorf("%s@%s: reading its zip: %v", mv.Path, mv.Version, err)
	}
	prefix := mv.Path + "@" + mv.Version + "/"
	var found []string
	for _, f := range r.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || strings.Contains(name, "/") || !slices.ContainsFunc(licenceFileNames, func(n string) bool { return strings.EqualFold(n, name) }) {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return "", err
		}
		text, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return "", err
		}
		cov := licensecheck.Scan(text)
		var ids []string
		for _, m := range cov.Match {
			if !slices.Contains(ids, m.ID) {
				ids = append(ids, m.ID)
			}
		}
		if cov.Percent >= licenceCoverage && slices.Equal(ids, []string{wantLicence}) {
			return name, nil
		}
		found = append(found, fmt.Sprintf("%s (%.0f%% of it matches %v)", name, cov.Percent, ids))
	}
	if len(found) == 0 {
		return "", fmt.Errorf("%s@%s: its zip has no licence file at its root (LICENSE, LICENSE.txt, COPYING…), so pkg.go.dev will not show its documentation: copy the repository's LICENSE into the module's directory", mv.Path, mv.Version)
	}
	return "", fmt.Errorf("%s@%s: its zip's licence files are not the %s text pkg.go.dev recognises (at least %d%% of the words): %s: copy the repository's LICENSE into the module's directory", mv.Path, mv.Version, wantLicence, licenceCoverage, strings.Join(found, "; "))
}
