package terraform_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// A backend template that joins the identity's parts with a separator that
// a part may hold itself renders the same key for two resources (tf's
// "eu-db" and tf-eu's "db" under "{{ .Instance }}-{{ .Name }}"), which
// would give them one state: it is refused at start. Templates whose parts
// cannot run into each other are accepted.
func TestBackendTemplateAmbiguousKeysRefused(t *testing.T) {
	t.Parallel()
	work := filepath.Join(t.TempDir(), "work")
	for _, tc := range []struct {
		key     string
		refused bool
	}{
		{"{{ .Kind }}/{{ .Instance }}-{{ .Name }}", true},
		{"{{ .Instance }}-{{ .Name }}-{{ .Kind }}", true},
		{"{{ .Instance }}{{ .Kind }}{{ .Name }}", true},
		{"{{ .Kind }}/{{ .Instance }}--{{ .Name }}", true},
		{"{{ .Kind }}/{{ .Name }}_{{ .Instance }}", false},
		{"{{ .Key }}", false},
		{"{{ .Instance }}/{{ .Kind }}/{{ .Name }}", false},
		{"{{ .Instance }}-{{ .Kind }}-{{ .Name }}", false},
		{"{{ .Kind }}.{{ .Name }}.{{ .Instance }}", false},
	} {
		backend := fmt.Sprintf(`backend "http" { address = "http://127.0.0.1:1/state/%s" }`, tc.key)
		_, err := newInstance(t, "tf", dbModule, work, map[string]any{"backend": backend})
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "backend: ") || !strings.Contains(err.Error(), "renders the same")):
			t.Errorf("backend key %s: error %v, want a refusal naming two resources with one key", tc.key, err)
		case !tc.refused && err != nil:
			t.Errorf("backend key %s: %v", tc.key, err)
		}
	}
}
