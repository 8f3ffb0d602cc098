package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HeyVersion is the release of the load generator the benchmark builds.
const HeyVersion = "v0.1.5"

// BuildHey installs the pinned hey into dir and returns the binary's path.
// It is built from its own module, with the dependencies of its release.
func BuildHey(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/rakyll/hey@"+HeyVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install hey@%s: %w\n%s", HeyVersion, err, out)
	}
	return filepath.Join(dir, "hey"), nil
}

// Reads is the outcome of a read load: every request the generator sent
// counts, whatever its answer.
type Reads struct {
	// Served are the 2xx answers, Refused the 503 and 429 ones, Failed the
	// other answers and the requests that got no answer.
	Served, Refused, Failed int
	// P50 and P99 are quantiles of the time to every answer, refusals and
	// failed statuses included (a request with no answer has no time).
	P50, P99 time.Duration
	// Took is the generator's own time from its first request to its
	// last answer.
	Took time.Duration
	// FirstErr is one of the errors of the requests with no answer.
	FirstErr string
}

// ServedRate is 2xx answers per second.
func (r *Reads) ServedRate() float64 { return float64(r.Served) / r.Took.Seconds() }

// String summarises the load.
func (r *Reads) String() string {
	s := fmt.Sprintf("%.0f served/s (%d in %v), %d refused, %d failed, p50 %v, p99 %v of all answers",
		r.ServedRate(), r.Served, r.Took.Round(time.Millisecond), r.Refused, r.Failed, r.P50, r.P99)
	if r.FirstErr != "" {
		s += " (an error: " + r.FirstErr + ")"
	}
	return s
}

// Hey is a running hey: clients that each send their next request as soon
// as the previous one is answered, whatever the answer (hey neither reads
// Retry-After nor backs off).
type Hey struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
}

// StartHey starts hey with clients clients against url, for d or, when d
// is 0, until Stop.
func StartHey(ctx context.Context, bin string, clients int, url string, d time.Duration) (*Hey, error) {
	// -z: a duration rather than a number of requests; a long one when
	// Stop ends it (an interrupt makes hey stop and report).
	z := d
	if z == 0 {
		z = 24 * time.Hour
	}
	h := &Hey{done: make(chan error, 1)}
	h.cmd = exec.CommandContext(ctx, bin, "-c", strconv.Itoa(clients), "-z", z.String(), "-t", "60", url)
	h.cmd.Stdout, h.cmd.Stderr = &h.stdout, &h.stderr
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start hey: %w", err)
	}
	go func() { h.done <- h.cmd.Wait() }()
	return h, nil
}

// Wait waits until hey has ended by itself and returns its figures.
func (h *Hey) Wait() (*Reads, error) {
	if err := <-h.done; err != nil {
		return nil, fmt.Errorf("hey: %w\n%s%s", err, tail(h.stdout.Bytes()), tail(h.stderr.Bytes()))
	}
	return parseHey(h.stdout.String())
}

// Stop interrupts hey, which stops its clients and reports, and returns
// its figures.
func (h *Hey) Stop() (*Reads, error) {
	if err := h.cmd.Process.Signal(os.Interrupt); err != nil {
		return nil, fmt.Errorf("interrupt hey: %w", err)
	}
	return h.Wait()
}

// RunHey runs hey with clients clients against url for d.
func RunHey(ctx context.Context, bin string, clients int, url string, d time.Duration) (*Reads, error) {
	h, err := StartHey(ctx, bin, clients, url, d)
	if err != nil {
		return nil, err
	}
	return h.Wait()
}

var (
	heyTotal   = regexp.MustCompile(`(?m)^\s*Total:\s+([0-9.]+) secs`)
	heyPct     = regexp.MustCompile(`(?m)^\s*(50|99)%{1,2} in ([0-9.]+) secs`)
	heyStatus  = regexp.MustCompile(`(?m)^\s*\[(\d+)\]\s+(\d+) responses`)
	heyErrLine = regexp.MustCompile(`^\s*\[(\d+)\]\s+(.*)$`)
)

// parseHey reads hey's summary: its total time, the 50% and 99% lines of
// its latency distribution (over every answer, whatever its status), its
// status code distribution and its error distribution (requests with no
// answer).
func parseHey(out string) (*Reads, error) {
	r := &Reads{}
	m := heyTotal.FindStringSubmatch(out)
	if m == nil {
		return nil, fmt.Errorf("hey printed no total time:\n%s", tail([]byte(out)))
	}
	r.Took = secs(m[1])
	for _, m := range heyPct.FindAllStringSubmatch(out, -1) {
		if m[1] == "50" {
			r.P50 = secs(m[2])
		} else {
			r.P99 = secs(m[2])
		}
	}
	for _, m := range heyStatus.FindAllStringSubmatch(out, -1) {
		code, _ := strconv.Atoi(m[1])
		count, _ := strconv.Atoi(m[2])
		switch {
		case code >= 200 && code < 300:
			r.Served += count
		case code == 503 || code == 429:
			r.Refused += count
		default:
			r.Failed += count
		}
	}
	if _, errs, ok := strings.Cut(out, "Error distribution:"); ok {
		for line := range strings.SplitSeq(errs, "\n") {
			if m := heyErrLine.FindStringSubmatch(line); m != nil {
				count, _ := strconv.Atoi(m[1])
				r.Failed += count
				if r.FirstErr == "" {
					r.FirstErr = m[2]
				}
			}
		}
	}
	if r.Served+r.Refused+r.Failed == 0 {
		return nil, errors.New("hey sent no request that got an answer or an error")
	}
	return r, nil
}

func secs(s string) time.Duration {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Second))
}
