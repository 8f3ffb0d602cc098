package action

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/no8s/no8s-agent/manifest"
)

// The values a CI pipeline action (a GitHub Actions workflow, a GitLab
// pipeline) is given, by their standard names. Both plugins use the same
// names, so that one resource type can move between them; each lets the
// configuration rename them.
const (
	PipelineOperation     = "operation"
	PipelineKind          = "kind"
	PipelineName          = "name"
	PipelineGeneration    = "generation"
	PipelineSpec          = "spec"
	PipelineCorrelationID = "correlation_id"
	// PipelinePluginConfig is the resource's plugin configuration as JSON,
	// sent only when the resource has one: a pipeline that does not
	// declare it keeps working (GitLab refuses undeclared inputs).
	PipelinePluginConfig = "plugin_config"
	// PipelineNamespace is the resource's namespace, sent only for a
	// resource outside the namespace "default" (and not cluster-scoped):
	// a pipeline that keys its state by kind and name alone then sees a
	// resource of another namespace rather than taking it for the default
	// namespace's of the same kind and name.
	PipelineNamespace = "namespace"
)

// PipelineCorrelationIDFor is unique per pipeline run: the resource, the
// generation, the operation and random bits, in a form that fits a run or
// pipeline name. The random bits make it unique; the name is there for
// people, and only its first manifest.MaxLabelLength characters are, so
// that a name of up to 253 characters gives an id of bounded length.
func PipelineCorrelationIDFor(req *Request, op Operation) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := req.Resource.Name
	if len(name) > manifest.MaxLabelLength {
		name = strings.TrimRight(name[:manifest.MaxLabelLength], ".-")
	}
	return fmt.Sprintf("%s-%s-g%d-%s-%s", strings.ToLower(req.Resource.Kind), name,
		req.Resource.Generation, op, hex.EncodeToString(b[:])), nil
}

// PipelineValues are the values a pipeline run of op on req's resource is
// given, by their standard names, each a string. names maps a standard
// name to the name the pipeline declares; a standard name it maps to ""
// is not sent.
func PipelineValues(req *Request, op Operation, correlation string, names map[string]string) map[string]string {
	spec := string(req.Resource.Spec)
	if spec == "" {
		spec = "{}"
	}
	values := map[string]string{
		PipelineOperation:     string(op),
		PipelineKind:          req.Resource.Kind,
		PipelineName:          req.Resource.Name,
		PipelineGeneration:    strconv.FormatInt(req.Resource.Generation, 10),
		PipelineSpec:          spec,
		PipelineCorrelationID: correlation,
	}
	if len(req.Resource.PluginConfig) > 0 {
		values[PipelinePluginConfig] = string(req.Resource.PluginConfig)
	}
	if ns := req.Resource.Namespace; ns != "" && ns != manifest.DefaultNamespace {
		values[PipelineNamespace] = ns
	}
	out := make(map[string]string, len(values))
	for std, v := range values {
		if name := names[std]; name != "" {
			out[name] = v
		}
	}
	return out
}
