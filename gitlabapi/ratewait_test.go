package gitlabapi

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestRateLimitWaitHostile reads the waits a hostile or broken GitLab may
// ask for: none is shorter than minRateWait (no spinning) or longer than
// maxRateWait (no waiting forever when the caller's context has no
// deadline), and none overflows.
func TestRateLimitWaitHostile(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	tests := []struct {
		name                  string
		retryAfter, resetUnix string
		want                  time.Duration
		ok                    bool
	}{
		{"Retry-After 30", "30", "", 30 * time.Second, true},
		{"Retry-After 0", "0", "", minRateWait, true},
		{"Retry-After a day", "86400", "", maxRateWait, true},
		{"Retry-After overflowing a Duration", "9223372037", "", maxRateWait, true},
		{"Retry-After the largest int64", "9223372036854775807", "", maxRateWait, true},
		{"Retry-After beyond int64", "99999999999999999999", "", 0, false},
		{"Retry-After negative", "-5", "", 0, false},
		{"Retry-After with a plus", "+30", "", 30 * time.Second, true},
		{"Retry-After fractional", "1.5", "", 0, false},
		{"Retry-After not a number", "soon", "", 0, false},
		{"Retry-After a date an hour ahead", now.Add(time.Hour).Format(http.TimeFormat), "", maxRateWait, true},
		{"Retry-After a date in year 9999", "Fri, 31 Dec 9999 23:59:59 GMT", "", maxRateWait, true},
		{"Retry-After a date in the past", now.Add(-time.Hour).Format(http.TimeFormat), "", minRateWait, true},
		{"Retry-After negative, reset in 10s", "-5", unix(10 * time.Second), 11 * time.Second, true},
		{"reset in the past", "", unix(-time.Hour), minRateWait, true},
		{"reset in a year", "", unix(365 * 24 * time.Hour), maxRateWait, true},
		{"reset the largest int64", "", "9223372036854775807", maxRateWait, true},
		{"reset negative", "", "-1", 0, false},
		{"reset in milliseconds", "", strconv.FormatInt(now.Add(time.Minute).UnixMilli(), 10), maxRateWait, true},
		{"nothing", "", "", 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.retryAfter != "" {
			h.Set("Retry-After", tt.retryAfter)
		}
		if tt.resetUnix != "" {
			h.Set("RateLimit-Reset", tt.resetUnix)
		}
		got, ok := rateLimitWait(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: wait %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
