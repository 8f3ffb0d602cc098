package e2e

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Unit says how a figure's values are written.
type Unit int

// The units of figures.
const (
	Seconds Unit = iota
	Millis
	PerSecond
	Bytes
)

func (u Unit) format(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	switch u {
	case Seconds:
		return fmt.Sprintf("%.2f s", v)
	case Millis:
		if v >= 1000 {
			return fmt.Sprintf("%.2f s", v/1000)
		}
		return fmt.Sprintf("%.1f ms", v)
	case PerSecond:
		return fmt.Sprintf("%.0f/s", v)
	case Bytes:
		return fmt.Sprintf("%.0f MB", v/(1<<20))
	}
	return fmt.Sprint(v)
}

// Figure is one line of a report: the agent's value, its peer's and the
// target. A figure that could not be measured has Err.
type Figure struct {
	Name     string
	Unit     Unit
	Agent    float64
	PeerName string
	Peer     float64
	Target   string
	Note     string
	Err      error
}

// Ratio is agent / peer, NaN without a peer.
func (f Figure) Ratio() float64 {
	if math.IsNaN(f.Peer) || f.Peer == 0 || math.IsNaN(f.Agent) {
		return math.NaN()
	}
	return f.Agent / f.Peer
}

// Report holds the figures of one N, in the order they were measured.
type Report struct {
	N       int
	Started time.Time
	// Load is the machine's load average (1 minute) when the run started:
	// the figures of a busy machine are slower, and noisier.
	Load    string
	Figures []Figure
}

// NewReport starts the report of N.
func NewReport(n int) *Report {
	return &Report{N: n, Started: time.Now(), Load: loadAverage()}
}

// loadAverage is the machine's load average over the last minute.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	load, _, _ := strings.Cut(string(b), " ")
	return load
}

// Add records a figure with no peer.
func (r *Report) Add(name string, u Unit, agent float64, target, note string) {
	r.Figures = append(r.Figures, Figure{Name: name, Unit: u, Agent: agent, Peer: math.NaN(), Target: target, Note: note})
}

// AddPeer records a figure with its peer.
func (r *Report) AddPeer(name string, u Unit, agent float64, peerName string, peer float64, target, note string) {
	r.Figures = append(r.Figures, Figure{Name: name, Unit: u, Agent: agent, PeerName: peerName, Peer: peer, Target: target, Note: note})
}

// Fail records that a figure could not be measured.
func (r *Report) Fail(name string, err error) {
	r.Figures = append(r.Figures, Figure{Name: name, Agent: math.NaN(), Peer: math.NaN(), Err: err})
}

// Write prints the report as a table.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "\nno8s-agent end to end, N = %d resources (10 types, one file each), 8 workers, noop actions, PostgreSQL on a Unix socket\n", r.N)
	fmt.Fprintf(w, "started %s, took %v, on %d cores; load average %s at the start, %s at the end\n\n", r.Started.UTC().Format(time.RFC3339),
		time.Since(r.Started).Round(time.Second), runtime.NumCPU(), r.Load, loadAverage())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tagent\tpeer\tratio\ttarget\tnote")
	fmt.Fprintln(tw, "------\t-----\t----\t-----\t------\t----")
	for _, f := range r.Figures {
		if f.Err != nil {
			fmt.Fprintf(tw, "%s\tFAILED\t\t\t\t%s\n", f.Name, firstLine(f.Err.Error()))
			continue
		}
		peer, ratio := "-", "-"
		if !math.IsNaN(f.Peer) {
			peer = f.PeerName + " " + f.Unit.format(f.Peer)
		}
		if q := f.Ratio(); !math.IsNaN(q) {
			ratio = fmt.Sprintf("%.2fx", q)
		}
		target := f.Target
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Unit.format(f.Agent), peer, ratio, target, f.Note)
	}
	tw.Flush()
}

// WriteGrowth prints how each figure grows across the reports, smallest N
// first.
func WriteGrowth(w io.Writer, reports []*Report) {
	if len(reports) < 2 {
		return
	}
	fmt.Fprintf(w, "\nhow the agent's figures grow with N\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"figure"}
	for _, r := range reports {
		head = append(head, fmt.Sprintf("N=%d", r.N))
	}
	head = append(head, fmt.Sprintf("x%d/%d", reports[len(reports)-1].N, reports[0].N))
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, f := range reports[0].Figures {
		cells := []string{f.Name}
		first, last := math.NaN(), math.NaN()
		for i, r := range reports {
			v := math.NaN()
			for _, g := range r.Figures {
				if g.Name == f.Name && g.Err == nil {
					v = g.Agent
				}
			}
			if i == 0 {
				first = v
			}
			last = v
			cells = append(cells, f.Unit.format(v))
		}
		growth := "-"
		if !math.IsNaN(first) && !math.IsNaN(last) && first != 0 {
			growth = fmt.Sprintf("%.1fx", last/first)
		}
		cells = append(cells, growth)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	tw.Flush()
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
