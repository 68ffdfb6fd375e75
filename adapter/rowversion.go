package adapter

import "github.com/kvbreaker/kvbreaker/driver"

// foreignBit marks the version of a foreign row; the bits below it are a
// hash of the row's content.
const foreignBit = 1 << 63

// RowVersion is the driver.Version a row of an SQL table reads as, for a
// store that writes only positive versions (MySQL, PostgreSQL): its own
// version if positive; else the row is foreign (written by another program
// or by hand, 0 or negative), and its version is 2^63 with foreignHash, a
// hash of the row's content in [0, 2^63) the statement computed, below it.
// Read as its own number, a version of 0 would be driver.NoVersion (a live
// row taken for an absent key) and a negative one would be compared as a
// record's.
func RowVersion(version, foreignHash int64) driver.Version {
	if version > 0 {
		return driver.Version(version)
	}
	return foreignBit | driver.Version(foreignHash)
}

// RowVersionArgs are the two parameters a compare-and-swap or -delete names
// old, a RowVersion, by: a record's version and -1, or 0 and a foreign row's
// hash. Neither pair matches a row of the other kind: a statement compares
// the version when it is positive and the hash otherwise.
func RowVersionArgs(old driver.Version) (version, foreignHash int64) {
	if old&foreignBit != 0 {
		return 0, int64(old &^ foreignBit)
	}
	return int64(old), -1
}
