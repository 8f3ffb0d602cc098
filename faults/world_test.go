package faults_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// siteType is the resource type the scenarios declare: a site with a
// number of replicas, provisioned by the action instance "web".
const siteType = `apiVersion: no8s.io/v1
kind: ResourceType
metadata: {name: Site}
spec:
  action: web
  versions:
    - name: v1
      schema:
        type: object
        required: [replicas]
        properties:
          replicas: {type: integer}
`

// site is the manifest of one Site.
func site(name string, replicas int) string {
	return fmt.Sprintf("apiVersion: no8s.io/v1\nkind: Site\nmetadata: {name: %s}\nspec: {replicas: %d}\n", name, replicas)
}

// worldScript pretends to provision sites: the world is a folder with one
// file per site holding the spec last applied, removed on destroy. Every
// call is appended to calls.log, so a test can count destroys. An apply
// takes a while, so that faults strike while actions run. Each call holds
// an exclusive lock on its site for as long as it runs (its children do
// not inherit it); a call that finds the lock taken, because another run
// of the same site is still going, logs an OVERLAP.
const worldScript = `#!/bin/sh
set -eu
exec 9>"$WORLD/$NO8S_RESOURCE_NAME.lock"
if ! flock -n 9; then
	echo "OVERLAP $NO8S_RESOURCE_NAME $$" >>"$WORLD/calls.log"
	flock 9
fi
echo "$NO8S_OPERATION $NO8S_RESOURCE_NAME $NO8S_RESOURCE_GENERATION" >>"$WORLD/calls.log"
case "$NO8S_OPERATION" in
apply)
	sleep "${APPLY_SECONDS:-0}" 9>&-
	printf '%s' "$NO8S_RESOURCE_SPEC" >"$WORLD/$NO8S_RESOURCE_NAME.json.tmp"
	mv "$WORLD/$NO8S_RESOURCE_NAME.json.tmp" "$WORLD/$NO8S_RESOURCE_NAME.json"
	echo '{}'
	;;
destroy)
	rm -f "$WORLD/$NO8S_RESOURCE_NAME.json"
	;;
esac
`

// apiResource is what the scenarios read of a resource in the API.
type apiResource struct {
	Name               string `json:"name"`
	Kind               string `json:"kind"`
	Status             string `json:"status"`
	StatusMessage      string `json:"status_message"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observed_generation"`
}

// apiSource is what the scenarios read of a source in the API.
type apiSource struct {
	Name                  string `json:"name"`
	Phase                 string `json:"phase"`
	Message               string `json:"message"`
	LastAppliedRevision   string `json:"last_applied_revision"`
	LastAttemptedRevision string `json:"last_attempted_revision"`
}

// listResources reads every resource through the agent's API, by name; nil
// when the API does not answer 200.
func listResources(t *testing.T, base string) map[string]apiResource {
	t.Helper()
	var list []apiResource
	if apiGet(t, base+"/api/v1/resources", &list) != 200 {
		return nil
	}
	out := make(map[string]apiResource, len(list))
	for _, r := range list {
		out[r.Name] = r
	}
	return out
}

// readWorld returns the spec the action last applied for each site.
func readWorld(t *testing.T, world string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(world, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = string(b)
	}
	return out
}

// countCalls counts the calls of one operation in the world's call log.
func countCalls(t *testing.T, world, op string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(world, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, op+" ") {
			n++
		}
	}
	return n
}

// newWorld makes the folder work/world that worldScript provisions into,
// writes the script as work/web.sh (the command of the action instance
// "web", run from work) and returns the world's path.
func newWorld(t *testing.T, work string) string {
	t.Helper()
	world := filepath.Join(work, "world")
	if err := os.MkdirAll(world, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "web.sh")
	writeFile(t, script, worldScript)
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	return world
}
