package manifest

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// publishedCRDs are the CRDs of testdata/crds (see NOTICE.md there), by the
// name they are written under in a test's tree, with the SHA-256 of those
// stored compressed (as published, uncompressed).
var publishedCRDs = []struct{ file, sha256 string }{
	{"gateway-api-gatewayclasses.yaml", ""},
	{"gateway-api-httproutes.yaml", ""},
	{"kyverno-clusterpolicies.yaml.gz", "fb041ee35f8e89b5bca566bb6e00cd67fccc30be8859998757333f2a40d79655"},
	{"crossplane-compositions.yaml", ""},
	{"cert-manager-certificaterequests.yaml", ""},
	{"prometheus-operator-servicemonitors.yaml.gz", "1dae27b7189b5ce7b9ab764656c18b4c75a45cde1e6f3af6a5e84c4317628919"},
	{"prometheus-operator-prometheusrules.yaml", ""},
	{"external-secrets-externalsecrets.yaml.gz", "690dbc0d51b5f9bc5266b450b533cfd22c5273268e8569102e528a39519cd4ba"},
	{"external-secrets-passwords.yaml", ""},
}

// readPublished reads a file of testdata as it was published: a .gz one
// decompressed and checked against its SHA-256.
func readPublished(t *testing.T, path, sum string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if sum != "" {
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Fatalf("%s is not the file published", path)
		}
	}
	return data
}

// publishedTree is every published CRD under crds/ and every valid
// published example under examples/, as testdata holds them.
func publishedTree(t *testing.T) map[string]string {
	t.Helper()
	tree := map[string]string{}
	for _, c := range publishedCRDs {
		tree["crds/"+strings.TrimSuffix(c.file, ".gz")] = string(readPublished(t, filepath.Join("testdata", "crds", c.file), c.sha256))
	}
	for _, project := range []string{"gateway-api/valid", "kyverno", "crossplane", "prometheus-operator", "external-secrets"} {
		dir := filepath.Join("testdata", "examples", filepath.FromSlash(project))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			tree["examples/"+project+"/"+e.Name()] = string(readPublished(t, filepath.Join(dir, e.Name()), ""))
		}
	}
	return tree
}

// TestPublishedNamespaces: the CRDs and examples of five projects load
// together as published, each example in the namespace it names (or the
// default one, or none for a cluster-scoped kind); a namespace that the
// examples do not use as the default namespace places those that name
// none; and the same kind and name in two namespaces load together.
func TestPublishedNamespaces(t *testing.T) {
	t.Parallel()
	tree := publishedTree(t)
	// Each example, as kind/namespace/name, from its file.
	want := map[string]string{
		"examples/gateway-api/valid/bar-httproute.yaml":                                             "HTTPRoute/default/bar-route",
		"examples/gateway-api/valid/foo-httproute.yaml":                                             "HTTPRoute/default/foo-route",
		"examples/gateway-api/valid/http-filter.yaml":                                               "HTTPRoute/default/http-filter-1",
		"examples/gateway-api/valid/http-request-header-add.yaml":                                   "HTTPRoute/default/header-http-echo",
		"examples/gateway-api/valid/http-request-header-remove.yaml":                                "HTTPRoute/default/header-http-echo",
		"examples/gateway-api/valid/httproute-all-fields-set.yaml":                                  "HTTPRoute/default/cors-allow-credentials",
		"examples/kyverno/restrict-ingress-classes.yaml":                                            "ClusterPolicy//restrict-ingress-classes",
		"examples/crossplane/composition-xnopresources.yaml":                                        "Composition//xnopresources.nop.example.org",
		"examples/prometheus-operator/admission-webhook-service-monitor.yaml":                       "ServiceMonitor/default/prometheus-operator-admission-webhook",
		"examples/prometheus-operator/example-app-service-monitor.yaml":                             "ServiceMonitor/default/example-app",
		"examples/prometheus-operator/thanos-prometheus-rule.yaml":                                  "PrometheusRule/default/prometheus-example-alerts",
		"examples/prometheus-operator/prometheus-example-rules.yaml":                                "PrometheusRule/default/prometheus-example-rules",
		"examples/external-secrets/gcpsm-wif-externalsecret.yaml":                                   "ExternalSecret/demo/demo-external-secret",
		"examples/external-secrets/aws-anchore-engine-access-credentials-external-secret.yaml":      "ExternalSecret/ci/anchore-access-credentials",
		"examples/external-secrets/aws-jenkins-credential-sonarqube-api-token-external-secret.yaml": "ExternalSecret/ci/sonarqube-api-token",
		"examples/external-secrets/generator-password.yaml":                                         "Password/default/my-password",
	}
	// Gateway API's two header examples declare the same HTTPRoute: one
	// of them is in the tree; the other loads alone, below.
	dups := map[string]string{}
	for _, dup := range []string{"examples/gateway-api/valid/http-request-header-remove.yaml"} {
		dups[dup] = tree[dup]
		delete(tree, dup)
	}
	load := func(t *testing.T, tree map[string]string, defaultNamespace string) (map[string][]*Resource, []Problem) {
		t.Helper()
		files, problems, err := ReadDir(writeTree(t, tree), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > 0 {
			return nil, problems
		}
		set, err := (&Validator{DefaultNamespace: defaultNamespace}).ValidateFiles(files, nil)
		if err != nil {
			return nil, err.(*ValidationError).Problems
		}
		if len(set.Types) != len(publishedCRDs) {
			t.Errorf("%d types from %d CRDs", len(set.Types), len(publishedCRDs))
		}
		byFile := map[string][]*Resource{}
		for _, r := range set.Resources {
			byFile[r.Origin.File] = append(byFile[r.Origin.File], r)
		}
		return byFile, nil
	}

	t.Run("as published", func(t *testing.T) {
		t.Parallel()
		byFile, ps := load(t, tree, "")
		if ps != nil {
			t.Fatalf("problems: %v", ps)
		}
		namespaces := map[string]bool{}
		for file, ref := range want {
			if _, dup := dups[file]; dup {
				continue
			}
			rs := byFile[file]
			if len(rs) != 1 {
				t.Errorf("%s: %d resources, want 1", file, len(rs))
				continue
			}
			r := rs[0]
			if got := r.Kind + "/" + r.Namespace + "/" + r.Name; got != ref {
				t.Errorf("%s: %s, want %s", file, got, ref)
			}
			if len(r.Spec) < 3 {
				t.Errorf("%s: spec %s", file, r.Spec)
			}
			namespaces[r.Namespace] = true
			// The namespace a file names is the one it is in.
			if i := strings.Index(tree[file], "\n  namespace: "); i >= 0 {
				ns := strings.Fields(tree[file][i+len("\n  namespace: "):])[0]
				if r.Namespace != ns {
					t.Errorf("%s names namespace %s, is in %q", file, ns, r.Namespace)
				}
			}
		}
		if got := slices.Sorted(mapKeys(namespaces)); strings.Join(got, ",") != ",ci,default,demo" {
			t.Errorf("namespaces used: %q", got)
		}
	})

	t.Run("the same route, each alone", func(t *testing.T) {
		t.Parallel()
		for file, data := range dups {
			alone := map[string]string{}
			for k, v := range tree {
				if strings.HasPrefix(k, "crds/") {
					alone[k] = v
				}
			}
			alone[file] = data
			byFile, ps := load(t, alone, "")
			if ps != nil || len(byFile[file]) != 1 || byFile[file][0].Kind+"/"+byFile[file][0].Namespace+"/"+byFile[file][0].Name != want[file] {
				t.Errorf("%s: %v, problems %v", file, byFile[file], ps)
			}
		}
	})

	t.Run("another default namespace", func(t *testing.T) {
		t.Parallel()
		byFile, ps := load(t, tree, "monitoring")
		if ps != nil {
			t.Fatalf("problems: %v", ps)
		}
		for file, ref := range want {
			if _, dup := dups[file]; dup {
				continue
			}
			r := byFile[file][0]
			wantNS := strings.Split(ref, "/")[1]
			if wantNS == "default" && !strings.Contains(tree[file], "namespace: default") {
				wantNS = "monitoring"
			}
			if r.Namespace != wantNS {
				t.Errorf("%s in %q with the default namespace monitoring, want %q", file, r.Namespace, wantNS)
			}
		}
	})

	t.Run("the same kind and name in two namespaces", func(t *testing.T) {
		t.Parallel()
		// External Secrets' example in its namespace ci, and the same
		// example in namespace staging; Prometheus Operator's
		// getting-started ServiceMonitor with no namespace (so in
		// default) beside its admission webhook's, renamed example-app,
		// which names default: a duplicate.
		two := map[string]string{}
		for k, v := range tree {
			two[k] = v
		}
		const es = "examples/external-secrets/aws-anchore-engine-access-credentials-external-secret.yaml"
		two["staging/"+filepath.Base(es)] = strings.Replace(tree[es], "namespace: ci", "namespace: staging", 1)
		byFile, ps := load(t, two, "")
		if ps != nil {
			t.Fatalf("problems: %v", ps)
		}
		a, b := byFile[es][0], byFile["staging/"+filepath.Base(es)][0]
		if a.Ref().String() != "ExternalSecret/ci/anchore-access-credentials" || b.Ref().String() != "ExternalSecret/staging/anchore-access-credentials" ||
			string(a.Spec) != string(b.Spec) {
			t.Errorf("two namespaces: %s %s, %s %s", a.Ref(), a.Spec, b.Ref(), b.Spec)
		}

		const sm = "examples/prometheus-operator/admission-webhook-service-monitor.yaml"
		two["dup/"+filepath.Base(sm)] = strings.Replace(tree[sm], "\n  name: prometheus-operator-admission-webhook\n", "\n  name: example-app\n", 1)
		_, ps = load(t, two, "")
		var msgs []string
		for _, p := range ps {
			msgs = append(msgs, p.String())
		}
		if len(ps) != 1 || !strings.Contains(msgs[0], "duplicate resource ServiceMonitor/example-app (first declared in ") {
			t.Errorf("the same ServiceMonitor in default twice: %q", msgs)
		}
	})

	t.Run("a namespace on a cluster-scoped kind", func(t *testing.T) {
		t.Parallel()
		bad := map[string]string{}
		for k, v := range tree {
			bad[k] = v
		}
		const kp = "examples/kyverno/restrict-ingress-classes.yaml"
		bad[kp] = strings.Replace(tree[kp], "  name: restrict-ingress-classes\n", "  name: restrict-ingress-classes\n  namespace: kyverno\n", 1)
		_, ps := load(t, bad, "")
		if len(ps) != 1 || !strings.Contains(ps[0].String(), `restrict-ingress-classes.yaml:`) ||
			!strings.HasSuffix(ps[0].String(), `metadata.namespace: Invalid value: "kyverno": ClusterPolicy is cluster-scoped and takes no namespace`) {
			t.Errorf("problems %v", ps)
		}
	})
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
