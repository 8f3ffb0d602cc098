package action_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/no8s/no8s-agent/action"
)

func TestCommandEnv(t *testing.T) {
	t.Parallel()
	agentEnv := map[string]string{"PATH": "/bin", "HOME": "/home/agent", "DB_TOKEN": "s3cret", "EMPTY": "", "NO8S_API_TOKEN": "agent-own"}
	s := action.Settings{Getenv: func(k string) (string, bool) { v, ok := agentEnv[k]; return v, ok }}
	tests := []struct {
		name        string
		env         map[string]string
		passEnv     []string
		wantVars    []string
		wantSecrets []string
		wantErrs    []string
	}{
		{"only PATH and HOME by default", nil, nil, []string{"PATH=/bin", "HOME=/home/agent"}, nil, nil},
		{"env sorted, then passEnv", map[string]string{"B": "2", "A": "1"}, []string{"DB_TOKEN", "EMPTY"},
			[]string{"PATH=/bin", "HOME=/home/agent", "A=1", "B=2", "DB_TOKEN=s3cret", "EMPTY="}, []string{"s3cret"}, nil},
		{"every mistake named", map[string]string{"1BAD": "x", "NO8S_X": "y", "DB_TOKEN": "z", "NUL": "a\x00b"},
			[]string{"DB_TOKEN", "DB_TOKEN", "MISSING", "bad-name", "NO8S_X"}, nil, nil, []string{
				`env: "1BAD" is not a valid variable name`, "env: NO8S_X is the plugin's", "env: DB_TOKEN is also in passEnv",
				"env: the value of NUL contains a NUL byte", "passEnv: DB_TOKEN is listed twice",
				"passEnv: MISSING is not set in the agent's environment", `passEnv: "bad-name" is not a valid variable name`,
				"passEnv: NO8S_X is the plugin's"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vars, secrets, problems := s.CommandEnv(tc.env, tc.passEnv, []string{"NO8S_X"}, "is the plugin's")
			if tc.wantErrs == nil && (!slices.Equal(vars, tc.wantVars) || !slices.Equal(secrets, tc.wantSecrets) || len(problems) > 0) {
				t.Errorf("vars %q, secrets %q, problems %v", vars, secrets, problems)
			}
			msg := errors.Join(problems...)
			for _, want := range tc.wantErrs {
				if msg == nil || !strings.Contains(msg.Error(), want) {
					t.Errorf("problems lack %q: %v", want, msg)
				}
			}
			for _, v := range vars {
				if strings.HasPrefix(v, "NO8S_API_TOKEN=") {
					t.Errorf("the agent's own variable leaked: %s", v)
				}
			}
		})
	}
}
