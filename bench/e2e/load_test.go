package e2e

import (
	"testing"
	"time"
)

// A summary of hey v0.1.5 (its template prints "%%" as is), with
// refusals, another status and requests with no answer.
const heySummary = `
Summary:
  Total:	5.0081 secs
  Requests/sec:	9500.1000

Latency distribution:
  10%% in 0.0032 secs
  50%% in 0.0065 secs
  99%% in 0.0264 secs

Status code distribution:
  [200]	36568 responses
  [404]	2 responses
  [429]	1 responses
  [503]	11001 responses

Error distribution:
  [3]	Get "http://127.0.0.1:1/": dial tcp: connection refused
  [1]	Get "http://127.0.0.1:1/": context deadline exceeded
`

func TestParseHeyCountsEveryRequest(t *testing.T) {
	t.Parallel()
	r, err := parseHey(heySummary)
	if err != nil {
		t.Fatal(err)
	}
	want := Reads{Served: 36568, Refused: 11002, Failed: 6, P50: 6500 * time.Microsecond, P99: 26400 * time.Microsecond,
		Took: 5008100 * time.Microsecond}
	got := *r
	got.FirstErr = ""
	if got.Served != want.Served || got.Refused != want.Refused || got.Failed != want.Failed ||
		got.P50.Round(time.Microsecond) != want.P50 || got.P99.Round(time.Microsecond) != want.P99 || got.Took.Round(time.Microsecond) != want.Took {
		t.Fatalf("parseHey = %+v, want %+v", got, want)
	}
	if r.FirstErr == "" {
		t.Error("no error kept from the error distribution")
	}
}
