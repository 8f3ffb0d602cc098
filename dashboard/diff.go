package dashboard

import (
	"bytes"
	"encoding/json"
	"strings"
)

// specLines renders a spec as the lines a diff compares: indented JSON
// with the keys of every object sorted, so that two specs that differ only
// in the order of their keys read the same, and a changed field is one
// changed line. A spec that does not parse is split as stored.
func specLines(raw json.RawMessage) []string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return strings.Split(string(raw), "\n")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The page escapes what it shows; JSON's own escapes of <, > and &
	// would only make the spec harder to read.
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return strings.Split(string(raw), "\n")
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
}

// diffOp says what a line of a diff is.
type diffOp byte

const (
	opSame diffOp = ' '
	opDel  diffOp = '-'
	opAdd  diffOp = '+'
)

// diffLine is one line of a diff, numbered as in the old and the new text
// (zero where it is not in that text).
type diffLine struct {
	Op       diffOp
	Old, New int
	Text     string
}

// maxDiffCells bounds the table the longest common subsequence is found
// with (old lines × new lines, after the common head and tail are cut): a
// larger change is shown as the old lines removed and the new ones added,
// which is still right, only less precise.
const maxDiffCells = 4 << 20

// diffText compares two texts line by line and returns every line of both,
// in order: those they share, those only a has (removed) and those only b
// has (added), from a longest common subsequence. Removals come before
// the additions that replace them.
func diffText(a, b []string) []diffLine {
	// The common head and tail cost nothing to match.
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	out := make([]diffLine, 0, len(a)+len(b))
	for i := range head {
		out = append(out, diffLine{Op: opSame, Old: i + 1, New: i + 1, Text: a[i]})
	}
	out = append(out, diffMiddle(a[head:len(a)-tail], b[head:len(b)-tail], head)...)
	for k := tail; k > 0; k-- {
		i, j := len(a)-k, len(b)-k
		out = append(out, diffLine{Op: opSame, Old: i + 1, New: j + 1, Text: a[i]})
	}
	return out
}

// diffMiddle diffs the lines between the common head and tail; off is the
// number of lines before them.
func diffMiddle(a, b []string, off int) []diffLine {
	var out []diffLine
	del := func(i int) { out = append(out, diffLine{Op: opDel, Old: off + i + 1, Text: a[i]}) }
	add := func(j int) { out = append(out, diffLine{Op: opAdd, New: off + j + 1, Text: b[j]}) }
	n, m := len(a), len(b)
	if n == 0 || m == 0 || n*m > maxDiffCells {
		for i := range n {
			del(i)
		}
		for j := range m {
			add(j)
		}
		return out
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:], in one flat table.
	w := m + 1
	lcs := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
				lcs[i*w+j] = lcs[(i+1)*w+j]
			default:
				lcs[i*w+j] = lcs[i*w+j+1]
			}
		}
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, diffLine{Op: opSame, Old: off + i + 1, New: off + j + 1, Text: a[i]})
			i++
			j++
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			del(i)
			i++
		default:
			add(j)
			j++
		}
	}
	for ; i < n; i++ {
		del(i)
	}
	for ; j < m; j++ {
		add(j)
	}
	return out
}

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// hunk is a run of changed lines with their context, as a unified diff
// shows it.
type hunk struct {
	// OldStart, OldLines, NewStart and NewLines make the "@@ -a,b +c,d @@"
	// header.
	OldStart, OldLines, NewStart, NewLines int
	Lines                                  []diffLine
	// Rows are the same lines side by side, for the split view.
	Rows []splitRow
}

// splitRow is a line of the split view: the old line on the left, the
// new one on the right; either may be absent.
type splitRow struct {
	Left, Right *diffLine
}

// hunks groups a diff into hunks of changes with diffContext lines of
// context; none when nothing changed.
func hunks(lines []diffLine) []hunk {
	var out []hunk
	for i := 0; i < len(lines); {
		if lines[i].Op == opSame {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i
		// Extend over changes closer than two contexts apart.
		for end < len(lines) {
			if lines[end].Op != opSame {
				end++
				continue
			}
			next := end
			for next < len(lines) && lines[next].Op == opSame {
				next++
			}
			if next == len(lines) || next-end > 2*diffContext {
				end = min(len(lines), end+diffContext)
				break
			}
			end = next
		}
		h := hunk{Lines: lines[start:end]}
		for _, l := range h.Lines {
			if l.Op != opAdd {
				h.OldLines++
				if h.OldStart == 0 {
					h.OldStart = l.Old
				}
			}
			if l.Op != opDel {
				h.NewLines++
				if h.NewStart == 0 {
					h.NewStart = l.New
				}
			}
		}
		h.Rows = splitRows(h.Lines)
		out = append(out, h)
		i = end
	}
	return out
}

// splitRows pairs the removed and added lines of each change, in order,
// so that a changed line reads next to what replaced it.
func splitRows(lines []diffLine) []splitRow {
	var rows []splitRow
	for i := 0; i < len(lines); {
		if lines[i].Op == opSame {
			l := &lines[i]
			rows = append(rows, splitRow{Left: l, Right: l})
			i++
			continue
		}
		var dels, adds []*diffLine
		for i < len(lines) && lines[i].Op == opDel {
			dels = append(dels, &lines[i])
			i++
		}
		for i < len(lines) && lines[i].Op == opAdd {
			adds = append(adds, &lines[i])
			i++
		}
		for k := range max(len(dels), len(adds)) {
			var r splitRow
			if k < len(dels) {
				r.Left = dels[k]
			}
			if k < len(adds) {
				r.Right = adds[k]
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// Class is the line's class on the page: del, add or same.
func (l diffLine) Class() string {
	switch l.Op {
	case opDel:
		return "del"
	case opAdd:
		return "add"
	}
	return "same"
}

// Sign is the line's mark in a unified diff: "-", "+" or a space.
func (l diffLine) Sign() string { return string(rune(l.Op)) }
