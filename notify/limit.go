package notify

import (
	"context"
	"errors"
	"math"
	gosync "sync"
	"time"
)

// limiter is a token bucket: burst deliveries at once, then perSecond.
type limiter struct {
	mu        gosync.Mutex
	perSecond float64
	burst     float64
	tokens    float64
	last      time.Time
}

func newLimiter(perSecond float64, burst int) *limiter {
	return &limiter{perSecond: perSecond, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// maxLimitWait is the longest wait for a token: beyond it the delivery is
// tried again later rather than holding the others of its round.
const maxLimitWait = 10 * time.Second

var errRateLimited = errors.New("rate limited")

// wait takes a token, waiting for one up to maxLimitWait.
func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := time.Now()
	l.tokens = math.Min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.perSecond)
	l.last = now
	l.tokens--
	need := -l.tokens
	if need > 0 && time.Duration(need/l.perSecond*float64(time.Second)) > maxLimitWait {
		l.tokens++
		l.mu.Unlock()
		return errRateLimited
	}
	l.mu.Unlock()
	if need <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(need / l.perSecond * float64(time.Second)))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
