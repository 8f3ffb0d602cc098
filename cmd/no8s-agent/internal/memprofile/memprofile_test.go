package memprofile

import "testing"

func TestWanted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"run", "--config", "no8s.yaml"}, false},
		{[]string{"run", "--pprof"}, true},
		{[]string{"run", "-pprof"}, true},
		{[]string{"run", "--pprof=true"}, true},
		{[]string{"run", "--pprof=1"}, true},
		{[]string{"run", "--pprof", "--pprof=false"}, false},
		{[]string{"run", "--", "--pprof"}, false},
		{[]string{"run", "pprof"}, false},
		{[]string{"run", "--pprofx"}, false},
	}
	for _, tt := range tests {
		if got := Wanted(tt.args); got != tt.want {
			t.Errorf("Wanted(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}
