package memory

import "github.com/kvbreaker/kvbreaker/driver"

// DefaultTraits is what every Store declares: no option changes it. Package
// skew builds its Memory profile from it.
func DefaultTraits() driver.Traits { return (&Store{}).Traits() }
