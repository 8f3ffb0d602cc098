// Package e2e is the end-to-end benchmark of the built agent: a generated
// Git repository of 10 resource types and N resources (one file each), the
// agent as a real process on PostgreSQL, and its peers (River on the same
// server, kubeconform on the same files, git clone of the same repository).
// Run it with `make bench-e2e` from the repository root.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// group is the API group of every generated type.
const group = "infra.example.com"

// kind is one generated resource type: its OpenAPI v3 schema and how its
// resources' specs are made. spec must keep every value valid for the
// schema for any index and revision.
type kind struct {
	name   string
	schema map[string]any
	// spec returns the spec of resource i at revision rev; a higher rev
	// changes one value, so that the spec hash and the generation change.
	spec func(i, rev int) map[string]any
}

// Shorthands that keep the schemas below readable.
type obj = map[string]any

func str(extra obj) obj      { return with(obj{"type": "string"}, extra) }
func integer(lo, hi int) obj { return obj{"type": "integer", "minimum": lo, "maximum": hi} }
func enum(vals ...any) obj   { return obj{"enum": vals} }
func with(m, extra obj) obj {
	for k, v := range extra {
		m[k] = v
	}
	return m
}
func object(required []string, props obj) obj {
	o := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

var (
	cidrPattern   = `^([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}$`
	domainPattern = `^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,}$`
	namePattern   = `^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`
	regions       = []any{"eu-west-1", "eu-central-1", "us-east-1", "us-west-2", "ap-south-1"}
	days          = []any{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
)

func pick(vals []any, i int) any { return vals[i%len(vals)] }

// kinds are the ten resource types of the workload, with nested objects,
// enums, defaults, required fields and patterns, as a real repository has.
var kinds = []kind{
	{
		name: "Network",
		schema: object([]string{"cidr", "region"}, obj{
			"cidr":   str(obj{"pattern": cidrPattern}),
			"region": enum(regions...),
			"mtu":    with(integer(1280, 9001), obj{"default": 1500}),
			"subnets": obj{"type": "array", "maxItems": 16, "items": object([]string{"name", "cidr", "zone"}, obj{
				"name": str(obj{"pattern": namePattern}),
				"cidr": str(obj{"pattern": cidrPattern}),
				"zone": enum("a", "b", "c"),
			})},
			"dns": with(object(nil, obj{
				"enabled": obj{"type": "boolean", "default": true},
				"domain":  str(obj{"pattern": domainPattern}),
			}), obj{"default": obj{}}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"cidr": fmt.Sprintf("10.%d.%d.0/24", i/256%256, i%256), "region": pick(regions, i), "mtu": 1500 + rev,
				"subnets": []any{
					obj{"name": "private-a", "cidr": fmt.Sprintf("10.%d.%d.0/26", i/256%256, i%256), "zone": "a"},
					obj{"name": "private-b", "cidr": fmt.Sprintf("10.%d.%d.64/26", i/256%256, i%256), "zone": "b"},
				},
				"dns": obj{"domain": fmt.Sprintf("net%d.internal.example.com", i)},
			}
		},
	},
	{
		name: "DatabaseCluster",
		schema: object([]string{"engine", "version", "storage_gb"}, obj{
			"engine":     enum("postgres", "mysql", "mariadb"),
			"version":    str(obj{"pattern": `^[0-9]+(\.[0-9]+)?$`}),
			"storage_gb": integer(10, 65536),
			"replicas":   with(integer(0, 15), obj{"default": 1}),
			"backup": with(object(nil, obj{
				"enabled":        obj{"type": "boolean", "default": true},
				"retention_days": with(integer(1, 35), obj{"default": 7}),
				"window":         str(obj{"pattern": `^[0-2][0-9]:[0-5][0-9]-[0-2][0-9]:[0-5][0-9]$`, "default": "02:00-03:00"}),
			}), obj{"default": obj{}}),
			"parameters": obj{"type": "object", "additionalProperties": str(obj{"maxLength": 256})},
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"engine": pick([]any{"postgres", "mysql", "mariadb"}, i), "version": fmt.Sprintf("%d.%d", 14+i%3, i%10),
				"storage_gb": 10 + (i+rev)%60000, "replicas": i % 3,
				"backup":     obj{"retention_days": 1 + i%35},
				"parameters": obj{"max_connections": fmt.Sprint(100 + i%400), "work_mem": "64MB"},
			}
		},
	},
	{
		name: "DNSRecord",
		schema: object([]string{"zone", "type", "values"}, obj{
			"zone":   str(obj{"pattern": domainPattern}),
			"type":   enum("A", "AAAA", "CNAME", "TXT", "MX"),
			"ttl":    with(integer(60, 86400), obj{"default": 300}),
			"values": obj{"type": "array", "minItems": 1, "maxItems": 8, "items": str(obj{"minLength": 1, "maxLength": 255})},
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"zone": "example.com", "type": "A", "ttl": 60 + (i+rev)%86000,
				"values": []any{fmt.Sprintf("192.0.%d.%d", i/256%256, i%256)},
			}
		},
	},
	{
		name: "Bucket",
		schema: object([]string{"region"}, obj{
			"region":     enum(regions...),
			"versioning": obj{"type": "boolean", "default": false},
			"acl":        with(enum("private", "public-read", "authenticated-read"), obj{"default": "private"}),
			"lifecycle": obj{"type": "array", "maxItems": 10, "items": object([]string{"prefix", "expire_days"}, obj{
				"prefix":      str(obj{"maxLength": 64}),
				"expire_days": integer(1, 3650),
			})},
			"encryption": with(object(nil, obj{
				"algorithm": with(enum("AES256", "aws:kms"), obj{"default": "AES256"}),
			}), obj{"default": obj{}}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"region": pick(regions, i+1), "versioning": i%2 == 0,
				"lifecycle": []any{obj{"prefix": "logs/", "expire_days": 1 + (i+rev)%3000}},
			}
		},
	},
	{
		name: "Queue",
		schema: object([]string{"retention_s"}, obj{
			"fifo":                 obj{"type": "boolean", "default": false},
			"visibility_timeout_s": with(integer(0, 43200), obj{"default": 30}),
			"retention_s":          integer(60, 1209600),
			"dead_letter": object([]string{"target"}, obj{
				"target":       str(obj{"pattern": namePattern}),
				"max_receives": with(integer(1, 1000), obj{"default": 5}),
			}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"fifo": i%4 == 0, "retention_s": 60 + (i+rev)%1000000,
				"dead_letter": obj{"target": fmt.Sprintf("dlq-%d", i%50)},
			}
		},
	},
	{
		name: "Cache",
		schema: object([]string{"engine", "node_type"}, obj{
			"engine":    enum("redis", "memcached"),
			"node_type": str(obj{"pattern": `^cache\.[a-z0-9]+\.[a-z0-9]+$`}),
			"nodes":     with(integer(1, 20), obj{"default": 1}),
			"eviction":  with(enum("allkeys-lru", "volatile-lru", "noeviction"), obj{"default": "allkeys-lru"}),
			"maintenance": with(object(nil, obj{
				"day":  with(enum(days...), obj{"default": "sun"}),
				"hour": with(integer(0, 23), obj{"default": 3}),
			}), obj{"default": obj{}}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"engine": pick([]any{"redis", "memcached"}, i), "node_type": "cache.m6g.large",
				"nodes": 1 + (i+rev)%20, "maintenance": obj{"day": pick(days, i)},
			}
		},
	},
	{
		name: "LoadBalancer",
		schema: object([]string{"scheme", "listeners"}, obj{
			"scheme": enum("internal", "internet-facing"),
			"listeners": obj{"type": "array", "minItems": 1, "maxItems": 10, "items": object([]string{"port", "protocol"}, obj{
				"port":        integer(1, 65535),
				"protocol":    enum("HTTP", "HTTPS", "TCP"),
				"target_port": integer(1, 65535),
			})},
			"health_check": with(object(nil, obj{
				"path":              str(obj{"pattern": `^/`, "default": "/healthz"}),
				"interval_s":        with(integer(5, 300), obj{"default": 30}),
				"healthy_threshold": with(integer(2, 10), obj{"default": 3}),
			}), obj{"default": obj{}}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"scheme": pick([]any{"internal", "internet-facing"}, i),
				"listeners": []any{
					obj{"port": 443, "protocol": "HTTPS", "target_port": 1024 + (i+rev)%60000},
					obj{"port": 80, "protocol": "HTTP"},
				},
			}
		},
	},
	{
		name: "Certificate",
		schema: object([]string{"domain"}, obj{
			"domain":            str(obj{"pattern": domainPattern}),
			"sans":              obj{"type": "array", "maxItems": 10, "items": str(obj{"pattern": domainPattern})},
			"issuer":            with(enum("letsencrypt", "internal-ca"), obj{"default": "letsencrypt"}),
			"renew_before_days": with(integer(1, 60), obj{"default": 30}),
			"key": with(object(nil, obj{
				"algorithm": with(enum("RSA", "ECDSA"), obj{"default": "ECDSA"}),
				"size":      with(enum(256, 384, 2048, 4096), obj{"default": 256}),
			}), obj{"default": obj{}}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"domain": fmt.Sprintf("app%d.example.com", i), "sans": []any{fmt.Sprintf("www.app%d.example.com", i)},
				"renew_before_days": 1 + (i+rev)%60,
			}
		},
	},
	{
		name: "ServiceAccount",
		schema: object([]string{"display_name"}, obj{
			"display_name": str(obj{"minLength": 1, "maxLength": 100}),
			"roles":        obj{"type": "array", "uniqueItems": true, "items": enum("viewer", "editor", "admin", "deployer")},
			"keys": with(object(nil, obj{
				"rotate_days": with(integer(1, 365), obj{"default": 90}),
				"max_keys":    with(integer(1, 10), obj{"default": 2}),
			}), obj{"default": obj{}}),
			"disabled": obj{"type": "boolean", "default": false},
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"display_name": fmt.Sprintf("Service account %d", i), "roles": []any{"viewer", "deployer"},
				"keys": obj{"rotate_days": 1 + (i+rev)%365},
			}
		},
	},
	{
		name: "VirtualMachine",
		schema: object([]string{"image", "machine_type", "disk"}, obj{
			"image":        str(obj{"pattern": `^[a-z0-9-]+/[a-z0-9.-]+$`}),
			"machine_type": enum("small", "medium", "large", "xlarge"),
			"disk": object([]string{"size_gb"}, obj{
				"size_gb": integer(10, 16384),
				"type":    with(enum("ssd", "hdd", "nvme"), obj{"default": "ssd"}),
			}),
			"tags":    obj{"type": "object", "additionalProperties": str(obj{"maxLength": 64})},
			"network": str(obj{"pattern": namePattern}),
		}),
		spec: func(i, rev int) map[string]any {
			return obj{
				"image": "debian/12.5", "machine_type": pick([]any{"small", "medium", "large", "xlarge"}, i),
				"disk": obj{"size_gb": 10 + (i+rev)%16000}, "tags": obj{"owner": fmt.Sprintf("team-%d", i%7), "cost-center": "cc-42"},
				"network": fmt.Sprintf("network-%06d", i-i%10), // the Network declared with it
			}
		},
	},
}

// Names of the extra type whose action runs for minutes and of its action.
const (
	longKind   = "LongTask"
	longAction = "long-sleep"
)

// Shape is how a workload lays its files out and how the agent runs on it.
type Shape struct {
	// Name names the workload in the report.
	Name string
	// Root puts every file at the repository's root, rather than types and
	// resources in folders of their own under manifests/.
	Root bool
	// Packed packs the repository's objects (git repack -a -d) once the
	// resources are committed; later commits stay loose.
	Packed bool
	// Defaults runs the agent with its default settings (INFO logs, the
	// default pool, 8 workers) rather than with warnings only.
	Defaults bool
	// HTTP serves the repository over smart HTTP (git http-backend) rather
	// than file://.
	HTTP bool
	// BusyCore takes one core with a busy loop, a process of its own, for
	// the whole scenario, peers included: a stand-in for a slower machine.
	BusyCore bool
}

// Shapes of the benchmark's workloads: the first is its own; the second
// is the shape of a repository as users lay one out and run the agent on
// it, as the outside measurements of the agent were made.
var (
	Nested = Shape{Name: "nested"}
	Flat   = Shape{Name: "flat", Root: true, Packed: true, Defaults: true}
	// The first again, over smart HTTP; and with one core busy.
	NestedHTTP = Shape{Name: "nested-http", HTTP: true}
	NestedBusy = Shape{Name: "nested-busy", BusyCore: true}
)

// Describe says what the workload is for N resources.
func (s Shape) Describe(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "N = %d resources of %d types, one file each, ", n, len(kinds))
	if s.Root {
		b.WriteString("every file at the repository root")
	} else {
		b.WriteString("in a folder per type under manifests/")
	}
	if s.HTTP {
		b.WriteString(", over smart HTTP (git http-backend)")
	} else {
		b.WriteString(", over file://")
	}
	if s.Packed {
		b.WriteString(" from a packed repository")
	}
	b.WriteString("; noop actions, 8 workers, PostgreSQL on a Unix socket")
	if s.Defaults {
		b.WriteString("; the agent's default settings (INFO logs, default pool)")
	} else {
		b.WriteString("; warnings-only logs")
	}
	if s.BusyCore {
		b.WriteString("; one core taken by a busy loop throughout")
	}
	return b.String()
}

// Workload is the generated repository: the manifests are in Dir/manifests
// (Dir itself for a shape with Root), committed on branch main.
type Workload struct {
	N     int
	Dir   string
	Shape Shape
	// revs[i] is resource i's current revision (0 as generated).
	revs []int
	// httpURL is where Serve serves the repository, while it does.
	httpURL string
}

// Manifests is the folder the agent's source and validate read.
func (w *Workload) Manifests() string {
	if w.Shape.Root {
		return w.Dir
	}
	return filepath.Join(w.Dir, "manifests")
}

// SourcePath is the source's path in the repository, empty for its root.
func (w *Workload) SourcePath() string {
	if w.Shape.Root {
		return ""
	}
	return "manifests"
}

// URL is the repository's URL: over smart HTTP while Serve serves it,
// else file://.
func (w *Workload) URL() string {
	if w.httpURL != "" {
		return w.httpURL
	}
	return "file://" + w.Dir
}

// Serve serves the repository over smart HTTP, with git http-backend as
// a Git hosting server runs it, on loopback until stop.
func (w *Workload) Serve() (stop func()) {
	git, err := exec.LookPath("git")
	if err != nil {
		git = "git"
	}
	h := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: filepath.Dir(w.Dir),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(w.Dir), "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(h)
	w.httpURL = srv.URL + "/" + filepath.Base(w.Dir) + "/.git"
	return func() {
		srv.Close()
		w.httpURL = ""
	}
}

// ResourceKind is the kind of resource i.
func ResourceKind(i int) string { return kinds[i%len(kinds)].name }

// ResourceName is the name of resource i.
func ResourceName(i int) string {
	return fmt.Sprintf("%s-%06d", strings.ToLower(kinds[i%len(kinds)].name), i)
}

// resourcePath is resource i's file, relative to the manifests folder.
func (w *Workload) resourcePath(i int) string {
	if w.Shape.Root {
		return ResourceName(i) + ".yaml" // the name holds the kind: unique
	}
	return filepath.Join("resources", strings.ToLower(ResourceKind(i)), ResourceName(i)+".yaml")
}

// typePath is kind k's file, relative to the manifests folder.
func (w *Workload) typePath(k string) string {
	if w.Shape.Root {
		return "type-" + strings.ToLower(k) + ".yaml"
	}
	return filepath.Join("types", strings.ToLower(k)+".yaml")
}

// Generate writes the types and n resources into a new repository under
// dir, laid out as shape says, and commits them.
func Generate(ctx context.Context, dir string, n int, shape Shape) (*Workload, error) {
	w := &Workload{N: n, Dir: dir, Shape: shape, revs: make([]int, n)}
	if err := os.MkdirAll(w.Manifests(), 0o755); err != nil {
		return nil, err
	}
	if _, err := w.git(ctx, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	for _, k := range kinds {
		if err := w.write(w.typePath(k.name), typeDoc(k.name, k.schema, "noop")); err != nil {
			return nil, err
		}
	}
	for i := range n {
		if err := w.writeResource(i); err != nil {
			return nil, err
		}
	}
	if _, err := w.Commit(ctx, fmt.Sprintf("Declare %d resources of %d types", n, len(kinds))); err != nil {
		return nil, err
	}
	if shape.Packed {
		if _, err := w.git(ctx, "repack", "-a", "-d", "-q"); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Generation is the generation resource i has in the agent once the
// commits so far are synced: one per change, from 1 as generated.
func (w *Workload) Generation(i int) int { return w.revs[i] + 1 }

// Touch moves each resource in idx to its next revision, changing its spec.
func (w *Workload) Touch(idx []int) error {
	for _, i := range idx {
		w.revs[i]++
		if err := w.writeResource(i); err != nil {
			return err
		}
	}
	return nil
}

// AddLongTasks declares the type LongTask, whose action runs for minutes,
// and count resources of it.
func (w *Workload) AddLongTasks(count int) ([]string, error) {
	schema := object(nil, obj{"note": str(obj{"maxLength": 100})})
	if err := w.write(w.typePath(longKind), typeDoc(longKind, schema, longAction)); err != nil {
		return nil, err
	}
	var names []string
	for j := range count {
		name := fmt.Sprintf("longtask-%d", j)
		names = append(names, name)
		if err := w.write(filepath.Join("resources", "longtask", name+".yaml"), resourceDoc(longKind, name, obj{"note": "runs for minutes"})); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// AddNetwork declares one more Network resource named name.
func (w *Workload) AddNetwork(name string) error {
	return w.write(filepath.Join("resources", "network", name+".yaml"), resourceDoc("Network", name, kinds[0].spec(w.N, 0)))
}

// Commit commits every change in the working tree and returns the commit's hash.
func (w *Workload) Commit(ctx context.Context, msg string) (string, error) {
	if _, err := w.git(ctx, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := w.git(ctx, "commit", "-q", "-m", msg); err != nil {
		return "", err
	}
	return w.git(ctx, "rev-parse", "HEAD")
}

func (w *Workload) writeResource(i int) error {
	k := kinds[i%len(kinds)]
	return w.write(w.resourcePath(i), resourceDoc(k.name, ResourceName(i), k.spec(i, w.revs[i])))
}

func (w *Workload) write(rel, content string) error {
	p := filepath.Join(w.Manifests(), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

func (w *Workload) git(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"-c", "user.name=Bench", "-c", "user.email=bench@example.com", "-c", "commit.gpgsign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Dir = w.Dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// typeDoc is a ResourceType manifest; the schema is written as JSON, which
// is YAML too, so that kubeconform's schemas hold exactly the same one.
func typeDoc(name string, schema obj, action string) string {
	js, err := json.Marshal(schema)
	if err != nil {
		panic(err) // the schemas are literals above
	}
	return fmt.Sprintf(`apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: %s
spec:
  group: %s
  description: %s, generated for the end-to-end benchmark
  action: %s
  versions:
    - name: v1
      schema: %s
`, name, group, name, action, js)
}

// resourceDoc is a resource manifest in block YAML; lists and scalars are
// written as JSON, which YAML reads as flow style.
func resourceDoc(kindName, name string, spec obj) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: %s/v1\nkind: %s\nmetadata:\n  name: %s\n  labels:\n    team: team-%d\n    env: %s\nspec:\n",
		group, kindName, name, len(name)%7, pick([]any{"production", "staging"}, len(name)))
	writeBlock(&b, spec, "  ")
	return b.String()
}

func writeBlock(b *strings.Builder, m obj, indent string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if sub, ok := m[k].(obj); ok && len(sub) > 0 {
			fmt.Fprintf(b, "%s%s:\n", indent, k)
			writeBlock(b, sub, indent+"  ")
			continue
		}
		if list, ok := m[k].([]any); ok {
			fmt.Fprintf(b, "%s%s:\n", indent, k)
			for _, item := range list {
				js, _ := json.Marshal(item)
				fmt.Fprintf(b, "%s  - %s\n", indent, js)
			}
			continue
		}
		js, _ := json.Marshal(m[k])
		fmt.Fprintf(b, "%s%s: %s\n", indent, k, js)
	}
}

// WriteKubeconformSchemas writes, for every type, the JSON Schema of a whole
// resource document where kubeconform's -schema-location
// '<dir>/{{ .ResourceKind }}.json' finds it: the same spec schema as the
// type's, and the envelope the agent checks (apiVersion, kind, metadata, no
// unknown top-level or metadata fields).
func WriteKubeconformSchemas(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stringMap := obj{"type": "object", "additionalProperties": obj{"type": "string"}}
	for _, k := range kinds {
		doc := obj{
			"$schema":              "http://json-schema.org/draft-04/schema#",
			"type":                 "object",
			"required":             []string{"apiVersion", "kind", "metadata", "spec"},
			"additionalProperties": false,
			"properties": obj{
				"apiVersion": obj{"enum": []string{group + "/v1"}},
				"kind":       obj{"enum": []string{k.name}},
				"metadata": object([]string{"name"}, obj{
					"name":        str(obj{"pattern": `^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`}),
					"labels":      stringMap,
					"annotations": stringMap,
				}),
				"spec":   k.schema,
				"action": str(obj{"pattern": `^[a-z0-9_-]+$`}),
				"dependsOn": obj{"type": "array", "items": object([]string{"kind", "name"}, obj{
					"kind": obj{"type": "string"}, "name": obj{"type": "string"},
				})},
				"status": obj{},
			},
		}
		js, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, strings.ToLower(k.name)+".json"), js, 0o644); err != nil {
			return err
		}
	}
	return nil
}
