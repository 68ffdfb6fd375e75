package kvbreaker

import "github.com/kvbreaker/kvbreaker/driver"

// ErrInvalidKey is matched by the error for a host key the Breaker will not
// pass to a store (see HostKey); it is driver.ErrInvalidKey.
var ErrInvalidKey = driver.ErrInvalidKey
