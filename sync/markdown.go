package sync

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes a plan, or why it was refused, as markdown for pull
// request comments: a summary line, a table of changes, and every problem
// with its file and line.
func WriteMarkdown(w io.Writer, p *Plan, planErr error) error {
	var b strings.Builder
	var serr *Error
	refused := errors.As(planErr, &serr)
	switch {
	case refused:
		fmt.Fprintf(&b, "**no8s plan refused: %s.** %s\n\n", serr.Reason, mdEscape(serr.Message))
	case planErr != nil:
		return planErr
	case p.Changes() == 0 && len(p.Types) == 0:
		fmt.Fprintf(&b, "**no8s plan:** no changes.\n\n")
	default:
		fmt.Fprintf(&b, "**no8s plan:** %s.\n\n", p.Summary())
	}
	if p != nil && (p.Changes() > 0 || len(p.Types) > 0) {
		b.WriteString("| change | resource | file | generation |\n|---|---|---|---|\n")
		for _, t := range p.Types {
			fmt.Fprintf(&b, "| %s | ResourceType %s %s | %s | |\n", t.Action, mdEscape(t.Name), mdEscape(t.Version), mdEscape(t.File))
		}
		for _, c := range p.All() {
			gen := ""
			if c.Generation > 0 {
				gen = fmt.Sprint(c.Generation)
			}
			fmt.Fprintf(&b, "| %s | %s/%s | %s | %s |\n", c.Action, mdEscape(c.Kind), mdEscape(c.Name), mdEscape(c.Location()), gen)
		}
		b.WriteString("\n")
	}
	if refused && len(serr.Problems) > 0 {
		b.WriteString("| file | line | problem |\n|---|---|---|\n")
		for _, pr := range serr.Problems {
			line := ""
			if pr.Line > 0 {
				line = fmt.Sprint(pr.Line)
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdEscape(pr.File), line, mdEscape(pr.Message))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdEscape keeps text from breaking a markdown table.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", "", "<", "&lt;", ">", "&gt;").Replace(s)
}
