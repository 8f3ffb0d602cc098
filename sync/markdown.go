package sync

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/redact"
)

// ActionPlan is what an action's Plan said about a change a preview would
// make: whether the world would change, and how.
type ActionPlan struct {
	Kind, Namespace, Name string
	// Instance is the action instance asked.
	Instance string
	Changes  bool
	Summary  string
	Output   string
	// Error is set when the action could not plan.
	Error string
}

// WriteMarkdown writes a plan, or why it was refused, as markdown for pull
// request comments: a summary line, a table of changes with a compact diff
// of each updated spec, every problem with its file and line, and the plans
// of actions, collapsed.
func WriteMarkdown(w io.Writer, p *Plan, planErr error, actionPlans ...ActionPlan) error {
	return WriteMarkdownIn(w, "", p, planErr, actionPlans...)
}

// WriteMarkdownIn is WriteMarkdown for a source whose files are in the
// folder dir of its repository: files are named from the repository's
// root, as a pull request shows them.
func WriteMarkdownIn(w io.Writer, dir string, p *Plan, planErr error, actionPlans ...ActionPlan) error {
	at := func(file string) string {
		if file == "" || dir == "" {
			return file
		}
		return strings.TrimPrefix(path.Join(dir, file), "/")
	}
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
		b.WriteString("| change | resource | file | generation | spec |\n|---|---|---|---|---|\n")
		for _, t := range p.Types {
			fmt.Fprintf(&b, "| %s | ResourceType %s %s | %s | | |\n", t.Action, mdEscape(t.Name), mdEscape(t.Version), mdEscape(at(t.File)))
		}
		for _, c := range p.All() {
			gen := ""
			if c.Generation > 0 {
				gen = fmt.Sprint(c.Generation)
			}
			spec := specDiff(c)
			c.File = at(c.File)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Action, mdEscape(c.Ref().String()), mdEscape(c.Location()), gen, spec)
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
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdEscape(at(pr.File)), line, mdEscape(pr.Message))
		}
		b.WriteString("\n")
	}
	for _, ap := range actionPlans {
		summary := ap.Summary
		switch {
		case ap.Error != "":
			summary = "could not plan: " + ap.Error
		case !ap.Changes && summary == "":
			summary = "no changes"
		case summary == "":
			summary = "changes"
		}
		ref := manifest.ObjectRef{Kind: ap.Kind, Namespace: ap.Namespace, Name: ap.Name}
		fmt.Fprintf(&b, "<details><summary>Plan of %s by %s: %s</summary>\n\n", htmlEscape(oneLine(ref.String())),
			htmlEscape(oneLine(ap.Instance)), htmlEscape(oneLine(summary)))
		if out := strings.TrimRight(ap.Output, "\n"); out != "" {
			fence := "```"
			for strings.Contains(out, fence) {
				fence += "`"
			}
			// The block and its every line are indented by a space, which
			// the renderer takes off again: no line of the output starts
			// the comment's line, where GitLab would run "/merge" as a
			// quick action with the agent's token. GitLab's extractor
			// does not skip a code block whose fence is longer than ```,
			// nor one cut open at the comment's limit.
			fmt.Fprintf(&b, " %s\n %s\n %s\n", fence, strings.ReplaceAll(out, "\n", "\n "), fence)
		}
		b.WriteString("\n</details>\n\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxSpecDiff bounds the fields a table cell lists.
const maxSpecDiff = 6

// specDiff lists, for an update, the spec fields that change: "a.b: 1 → 2",
// "+c: x", "-d". Other changes have none.
func specDiff(c Change) string {
	if c.Action != Update || len(c.Before) == 0 || len(c.After) == 0 {
		return ""
	}
	var before, after any
	if json.Unmarshal(c.Before, &before) != nil || json.Unmarshal(c.After, &after) != nil {
		return ""
	}
	old, cur := map[string]string{}, map[string]string{}
	flatten("", before, old)
	flatten("", after, cur)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		switch v, had := old[k]; {
		case !had:
			parts = append(parts, fmt.Sprintf("+%s: %s", k, cur[k]))
		case v != cur[k]:
			parts = append(parts, fmt.Sprintf("%s: %s → %s", k, v, cur[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, kept := cur[k]; !kept {
			parts = append(parts, "-"+k)
		}
	}
	if len(parts) == 0 {
		return "action changed"
	}
	if len(parts) > maxSpecDiff {
		parts = append(parts[:maxSpecDiff], fmt.Sprintf("and %d more", len(parts)-maxSpecDiff))
	}
	return "`" + strings.ReplaceAll(mdEscape(strings.Join(parts, "; ")), "`", "'") + "`"
}

// flatten writes the leaves of v under dotted paths; arrays are leaves.
func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, sub := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, sub, out)
		}
		return
	}
	data, _ := json.Marshal(v)
	s := string(data)
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	out[prefix] = s
}

// oneLine folds line breaks into spaces: text inside an HTML element of
// a comment that keeps to its line can neither end the element's block
// with a blank line (and have what follows rendered as Markdown) nor start
// a line of the comment (a quick action, on GitLab).
func oneLine(s string) string { return lineBreaks.Replace(s) }

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// htmlEscape escapes text inside HTML elements of a comment, mentions
// included. Secret masking knows the form it gives.
func htmlEscape(s string) string { return redact.HTMLText(s) }

// mdEscape keeps text from breaking a markdown table. Secret masking knows
// the form it gives.
func mdEscape(s string) string { return redact.MarkdownCell(s) }
