package reconcile

import (
	"math/rand/v2"
	"time"
)

// Backoff returns the delay before the retry that follows the n-th
// consecutive failure (n >= 1): initial x 2^(n-1), spread by ±10% so that
// resources that failed together do not retry together, and capped at max.
func Backoff(n int, initial, max time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	d := initial
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	jitter := 0.9 + 0.2*rand.Float64()
	return min(time.Duration(float64(d)*jitter), max)
}
