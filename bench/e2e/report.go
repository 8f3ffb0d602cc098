package e2e

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
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
	Count
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
	case Count:
		return fmt.Sprintf("%.0f", v)
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
	// Missed says why the figure misses its target, when the harness can
	// tell (a read load with refusals misses its latency target whatever
	// its latency).
	Missed string
	Err    error
}

// Ratio is agent / peer, NaN without a peer.
func (f Figure) Ratio() float64 {
	if math.IsNaN(f.Peer) || f.Peer == 0 || math.IsNaN(f.Agent) {
		return math.NaN()
	}
	return f.Agent / f.Peer
}

// Report holds the figures of one run of one workload at one N, in the
// order they were measured.
type Report struct {
	N        int
	Workload Shape
	Started  time.Time
	// Load is the machine's load average (1 minute) when the run started:
	// the figures of a busy machine are slower, and noisier.
	Load    string
	Figures []Figure
}

// NewReport starts the report of a run of workload w at N.
func NewReport(n int, w Shape) *Report {
	return &Report{N: n, Workload: w, Started: time.Now(), Load: loadAverage()}
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

// Summary is the runs of one workload at one N.
type Summary struct {
	N        int
	Workload Shape
	Started  time.Time
	Load     string
	Runs     []*Report
}

// NewSummary starts the summary of workload w at N.
func NewSummary(n int, w Shape) *Summary {
	return &Summary{N: n, Workload: w, Started: time.Now(), Load: loadAverage()}
}

// row is one figure across the runs.
type row struct {
	first  Figure
	agents []float64
	peers  []float64
	ratios []float64
	missed []string
	errs   []error
}

// rows gathers each figure across the runs, in the order the figures were
// first measured.
func (s *Summary) rows() []*row {
	var order []*row
	byName := map[string]*row{}
	for _, r := range s.Runs {
		for _, f := range r.Figures {
			rw := byName[f.Name]
			if rw == nil {
				rw = &row{first: f}
				byName[f.Name] = rw
				order = append(order, rw)
			}
			if rw.first.Err != nil && f.Err == nil {
				rw.first = f
			}
			if f.Err != nil {
				rw.errs = append(rw.errs, f.Err)
				continue
			}
			rw.agents = append(rw.agents, f.Agent)
			if !math.IsNaN(f.Peer) {
				rw.peers = append(rw.peers, f.Peer)
			}
			if q := f.Ratio(); !math.IsNaN(q) {
				rw.ratios = append(rw.ratios, q)
			}
			if f.Missed != "" {
				rw.missed = append(rw.missed, f.Missed)
			}
		}
	}
	return order
}

// spread writes the median of vs and, for more than one value, their
// range: "12.0 ms [10.1 ms–13.2 ms]".
func spread(vs []float64, format func(float64) string) string {
	if len(vs) == 0 {
		return "-"
	}
	c := slices.Clone(vs)
	slices.Sort(c)
	med := medianOf(c)
	if len(c) == 1 {
		return format(med)
	}
	return fmt.Sprintf("%s [%s–%s]", format(med), format(c[0]), format(c[len(c)-1]))
}

// medianOf is the median of vs, NaN when there is none.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	c := slices.Clone(vs)
	slices.Sort(c)
	if len(c)%2 == 0 {
		return (c[len(c)/2-1] + c[len(c)/2]) / 2
	}
	return c[len(c)/2]
}

// Write prints the summary as a table: each figure's median over the runs
// and, for more than one run, its range.
func (s *Summary) Write(w io.Writer) {
	fmt.Fprintf(w, "\nno8s-agent end to end, workload %q: %s\n", s.Workload.Name, s.Workload.Describe(s.N))
	spreadNote := ""
	if len(s.Runs) > 1 {
		spreadNote = ", each figure the median [min–max] of the runs"
	}
	fmt.Fprintf(w, "%d run(s)%s; started %s, took %v, on %d cores; load average %s at the start, %s at the end\n\n", len(s.Runs), spreadNote,
		s.Started.UTC().Format(time.RFC3339), time.Since(s.Started).Round(time.Second), runtime.NumCPU(), s.Load, loadAverage())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tagent\tpeer\tratio\ttarget\tnote")
	fmt.Fprintln(tw, "------\t-----\t----\t-----\t------\t----")
	for _, rw := range s.rows() {
		f := rw.first
		if len(rw.agents) == 0 {
			fmt.Fprintf(tw, "%s\tFAILED\t\t\t\t%s\n", f.Name, firstLine(rw.errs[0].Error()))
			continue
		}
		peer, ratio := "-", "-"
		if len(rw.peers) > 0 {
			peer = f.PeerName + " " + spread(rw.peers, f.Unit.format)
		}
		if len(rw.ratios) > 0 {
			ratio = spread(rw.ratios, func(q float64) string { return fmt.Sprintf("%.2fx", q) })
		}
		target := f.Target
		if target == "" {
			target = "-"
		}
		if len(rw.missed) > 0 {
			target += fmt.Sprintf(" MISSED (%s", rw.missed[0])
			if len(s.Runs) > 1 {
				target += fmt.Sprintf("; in %d of %d runs", len(rw.missed), len(s.Runs))
			}
			target += ")"
		}
		note := f.Note
		if len(rw.errs) > 0 {
			note = strings.TrimPrefix(note+"; ", "; ") + fmt.Sprintf("FAILED in %d of %d runs: %s", len(rw.errs), len(s.Runs), firstLine(rw.errs[0].Error()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, spread(rw.agents, f.Unit.format), peer, ratio, target, note)
	}
	tw.Flush()
}

// WriteGrowth prints how each figure of one workload grows across the
// summaries (medians of their runs), smallest N first.
func WriteGrowth(w io.Writer, sums []*Summary) {
	if len(sums) < 2 {
		return
	}
	fmt.Fprintf(w, "\nhow the agent's figures grow with N, workload %q (medians of the runs)\n\n", sums[0].Workload.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"figure"}
	for _, s := range sums {
		head = append(head, fmt.Sprintf("N=%d", s.N))
	}
	head = append(head, fmt.Sprintf("x%d/%d", sums[len(sums)-1].N, sums[0].N))
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	var rows [][]*row
	for _, s := range sums {
		rows = append(rows, s.rows())
	}
	for _, rw := range rows[0] {
		f := rw.first
		cells := []string{f.Name}
		first, last := math.NaN(), math.NaN()
		for i := range sums {
			v := math.NaN()
			for _, g := range rows[i] {
				if g.first.Name == f.Name {
					v = medianOf(g.agents)
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
