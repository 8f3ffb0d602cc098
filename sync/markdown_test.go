package sync

import (
	"encoding/json"
	"testing"
)

func TestSpecDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		before, after, want string
	}{
		{`{"a":1,"b":{"c":"x"}}`, `{"a":2,"b":{"c":"x"},"d":true}`, "`a: 1 → 2; +d: true`"},
		{`{"a":1,"gone":[1]}`, `{"a":1}`, "`-gone`"},
		{`{"a":1}`, `{"a":1}`, "action changed"},
		{`{"s":"a|b"}`, `{"s":"c"}`, "`s: \"a\\|b\" → \"c\"`"},
	}
	for _, tt := range tests {
		got := specDiff(Change{Action: Update, Before: json.RawMessage(tt.before), After: json.RawMessage(tt.after)})
		if got != tt.want {
			t.Errorf("specDiff(%s, %s) = %s, want %s", tt.before, tt.after, got, tt.want)
		}
	}
	if got := specDiff(Change{Action: Create, After: json.RawMessage(`{"a":1}`)}); got != "" {
		t.Errorf("a create has a diff: %s", got)
	}
}
