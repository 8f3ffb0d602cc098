package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/manifest"
)

// funcs are the template functions. They return plain strings; the
// templates escape them.
func (h *handler) funcs() template.FuncMap {
	return template.FuncMap{
		"when":      h.when,
		"badge":     badgeOf,
		"shortRev":  shortRevision,
		"firstLine": firstLine,
		"duration":  formatDuration,
		"pathEsc":   url.PathEscape,
		"eqFold":    strings.EqualFold,
		"absTime":   absTime,
		"ok":        okBadge,
		"condClass": conditionClass,
		"linked":    linked,
		"revLink":   func(r manifest.Revision, u string) revisionRow { return revisionRow{Rev: r, URL: u} },
	}
}

// moment is a point in time as a page shows it: relative, with the
// absolute time in a tooltip and a machine-readable attribute.
type moment struct {
	Set           bool
	Rel, Abs, ISO string
}

// when formats a time.Time or *time.Time relative to now; zero and nil
// times are not Set.
func (h *handler) when(v any) moment {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case *time.Time:
		if v != nil {
			t = *v
		}
	default:
		panic(fmt.Sprintf("dashboard: when of %T", v))
	}
	if t.IsZero() {
		return moment{}
	}
	return moment{Set: true, Rel: relative(h.now(), t), Abs: absTime(t), ISO: t.UTC().Format(time.RFC3339)}
}

// absTime formats t in UTC to the second.
func absTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// relative says how long before (or after) now t is, in its largest unit:
// "12s ago", "5m ago", "3h ago", "2d ago", "in 40s".
func relative(now, t time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// shortRevision cuts the digest of a revision so that it reads like a short
// commit hash: "main@sha1:0123456789…" becomes "main@sha1:0123456", and a
// directory's "sha256:…" keeps 12 digits. Pages show the full revision in a
// tooltip.
func shortRevision(r manifest.Revision) string {
	s := string(r)
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s
	}
	n := 7
	if strings.HasSuffix(s[:i], "sha256") {
		n = 12
	}
	if len(s)-i-1 <= n {
		return s
	}
	return s[:i+1+n]
}

// firstLine returns the first line of a message, such as a commit's subject.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// formatDuration rounds d to what people care about: "850µs", "42ms",
// "1.25s", "3m12s".
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// prettyJSON indents a JSON document; "" when there is none. A document that
// does not parse is shown as stored.
func prettyJSON(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// badge is a state as a coloured label: the colour comes from Class, and the
// Icon and Text say the same for those who cannot tell colours apart.
type badge struct {
	Class, Icon, Text string
}

// badgeOf returns the badge of a resource phase or a source phase.
func badgeOf(v any) badge {
	s := fmt.Sprint(v)
	switch s {
	case "ready":
		return badge{"ok", "✓", s}
	case "failed":
		return badge{"bad", "✗", s}
	case "reconciling":
		return badge{"busy", "↻", s}
	case "deleting":
		return badge{"warn", "⊖", s}
	case "stalled":
		return badge{"warn", "‖", s}
	case "orphaned":
		// No configuration lists the source: its resources wait untouched.
		return badge{"warn", "⌀", s}
	case "pruning":
		return badge{"warn", "⊖", s}
	case "pending":
		return badge{"idle", "○", s}
	case "failing":
		return badge{"bad", "✗", s}
	case "waiting":
		return badge{"busy", "◷", s}
	case "suspended":
		// Not reconciled (or synced) until someone resumes it.
		return badge{"warn", "⏸", s}
	case "":
		return badge{"idle", "○", "unknown"}
	default:
		return badge{"idle", "•", s}
	}
}

// okBadge is the badge of an attempt's outcome.
func okBadge(success bool) badge {
	if success {
		return badge{"ok", "✓", "succeeded"}
	}
	return badge{"bad", "✗", "failed"}
}

// conditionClass colours a condition's status by what it means for the
// resource: a true Ready is good, a true Degraded is bad, a true
// Reconciling is work in progress. Other conditions are not coloured.
func conditionClass(c manifest.Condition) string {
	switch {
	case c.Type == manifest.ConditionReady && c.Status == manifest.ConditionTrue,
		c.Type == manifest.ConditionDegraded && c.Status == manifest.ConditionFalse:
		return "ok"
	case c.Type == manifest.ConditionReady && c.Status == manifest.ConditionFalse,
		c.Type == manifest.ConditionDegraded && c.Status == manifest.ConditionTrue:
		return "bad"
	case c.Type == manifest.ConditionReconciling && c.Status == manifest.ConditionTrue:
		return "busy"
	}
	return ""
}
