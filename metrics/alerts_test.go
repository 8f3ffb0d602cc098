package metrics_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const alertsDir = "../examples/prometheus"

// promtool returns the promtool the tests run: the one NO8S_PROMTOOL
// names, else the one make promtool built into .tools, else the one on
// PATH. Without any the test fails: `make promtool` builds it.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NO8S_PROMTOOL"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("NO8S_PROMTOOL=%s: %v (make promtool builds it)", p, err)
		}
		return p
	}
	if built, _ := filepath.Glob("../.tools/promtool-*/promtool"); len(built) > 0 {
		// Absolute: the tests run promtool in the rules' folder.
		abs, err := filepath.Abs(built[len(built)-1])
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed to check the alert rules: run the tests with make test, or make promtool and set NO8S_PROMTOOL")
	}
	return p
}

// TestAlertRules checks examples/prometheus/alerts.yaml with promtool: the
// rules are valid, and their unit tests (alerts_test.yaml) fire each alert
// when it should and not before, with its labels and annotations.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = alertsDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesNameExposedMetrics checks that every metric the alert
// rules and their tests name is one the agent exposes.
func TestAlertRulesNameExposedMetrics(t *testing.T) {
	t.Parallel()
	got := scrapeAll(t)
	var referenced int
	for _, name := range []string{"alerts.yaml", "alerts_test.yaml"} {
		data, err := os.ReadFile(filepath.Join(alertsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range metricName.FindAllString(string(data), -1) {
			referenced++
			if !exposed(got, m) {
				t.Errorf("%s names %s, which the agent does not expose", name, m)
			}
		}
	}
	if referenced == 0 {
		t.Error("the alert rules name no no8s_ metric")
	}
}
