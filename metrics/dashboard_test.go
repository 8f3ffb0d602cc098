package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

const dashboardPath = "../examples/grafana/no8s-dashboard.json"

// dashboard is the part of a Grafana dashboard the tests look at.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource *datasourceRef  `json:"datasource"`
	GridPos    *map[string]int `json:"gridPos"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	// Panels are those of a collapsed row.
	Panels []panel `json:"panels"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *datasourceRef  `json:"datasource"`
}

func readDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardPath, err)
	}
	return &d
}

// allPanels returns the panels, with those of collapsed rows, but not the rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, allPanels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

var metricName = regexp.MustCompile(`\bno8s_[a-zA-Z0-9_]+`)

func TestDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want both set and a schema of Grafana 10 or later",
			d.UID, d.Title, d.SchemaVersion)
	}

	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("datasource variable = %+v, want a Prometheus datasource variable", v)
	}
	// exprs are the queries to check: the panels' and the variables'.
	var exprs []string
	for _, name := range []string{"source", "kind"} {
		v, ok := vars[name]
		if !ok {
			t.Errorf("no %q template variable", name)
			continue
		}
		if v.Type != "query" || !strings.HasPrefix(v.Definition, "label_values(") ||
			!strings.Contains(string(v.Query), v.Definition) || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("variable %s = %+v, want a label_values query on ${datasource}", name, v)
		}
		exprs = append(exprs, v.Definition)
	}

	panels := allPanels(d.Panels)
	if len(panels) < 13 {
		t.Errorf("%d panels, want at least 13", len(panels))
	}
	ids := map[int]string{}
	for _, p := range panels {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q has id %d, also used by %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Title == "" || p.GridPos == nil {
			t.Errorf("panel %d has no title or no gridPos", p.ID)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable: %+v", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %q has no expr, or its refId is missing or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s does not use ${datasource}", p.Title, tg.RefID)
			}
			if !balanced(tg.Expr) {
				t.Errorf("panel %q: unbalanced brackets in %s", p.Title, tg.Expr)
			}
			exprs = append(exprs, tg.Expr)
		}
	}

	// Every metric a query names is one the agent exposes.
	got := scrapeAll(t)
	var referenced int
	for _, expr := range exprs {
		for _, name := range metricName.FindAllString(expr, -1) {
			referenced++
			if !exposed(got, name) {
				t.Errorf("%s names %s, which the agent does not expose", expr, name)
			}
		}
	}
	if referenced == 0 {
		t.Error("no query names a no8s_ metric")
	}
}

// exposed reports whether name is a family in got, or a series of one of
// its histograms.
func exposed(got families, name string) bool {
	if _, ok := got[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if mf := got[base]; ok && mf != nil && mf.GetType() == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// balanced reports whether the brackets of a PromQL expression pair up
// (quoted strings aside).
func balanced(expr string) bool {
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	var stack []rune
	var quote rune
	for _, r := range expr {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && quote == 0
}
