package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func BenchmarkDecodeAliasBomb(b *testing.B) {
	data := []byte(aliasBomb)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, ps := DecodeFile("bomb.yaml", data, DecodeOptions{}); len(ps) != 1 {
			b.Fatal("alias bomb accepted")
		}
	}
}

// The tree the validation benchmarks use: benchTypes resource types with
// realistic schemas (nested objects, enums, defaults, required fields,
// patterns, lists of objects, maps) and benchResources resources, one per
// file, as in a GitOps repository at scale.
const (
	benchTypes     = 10
	benchResources = 10_000
)

// benchTypeDoc declares type Kind<i>.
func benchTypeDoc(i int) string {
	return fmt.Sprintf(`apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: Kind%d
spec:
  group: bench.example.com
  description: Benchmark type %d
  action: noop
  versions:
    - name: v1
      schema:
        type: object
        required: [size, region, owner]
        properties:
          size: {type: integer, minimum: 1, maximum: 100000}
          region: {type: string, enum: [eu-west-1, us-east-1, ap-south-1]}
          owner: {type: string, pattern: '^[a-z][a-z0-9-]{1,30}$'}
          tier: {type: string, enum: [free, standard, premium], default: standard}
          replicas: {type: integer, minimum: 0, maximum: 50, default: 1}
          note: {type: string, nullable: true, maxLength: 200}
          network:
            type: object
            default: {}
            properties:
              cidr: {type: string, pattern: '^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$'}
              public: {type: boolean, default: false}
              ports:
                type: array
                maxItems: 16
                items:
                  type: object
                  required: [port]
                  properties:
                    port: {type: integer, minimum: 1, maximum: 65535}
                    protocol: {type: string, enum: [TCP, UDP], default: TCP}
          backup:
            type: object
            properties:
              enabled: {type: boolean, default: true}
              schedule: {type: string, pattern: '^[0-9*/, -]+$'}
              retentionDays: {type: integer, minimum: 1, maximum: 365, default: 7}
          tags:
            type: object
            additionalProperties: {type: string, maxLength: 63}
`, i, i)
}

// benchResourceDoc declares resource n; every tenth is JSON, as some
// repositories generate them.
func benchResourceDoc(n int) string {
	regions := []string{"eu-west-1", "us-east-1", "ap-south-1"}
	if n%10 == 9 {
		return fmt.Sprintf(`{
  "apiVersion": "bench.example.com/v1",
  "kind": "Kind%d",
  "metadata": {"name": "res-%05d", "labels": {"team": "t%d", "env": "prod"}},
  "spec": {
    "size": %d,
    "region": %q,
    "owner": "team-%d",
    "network": {"cidr": "10.%d.%d.0/24", "ports": [{"port": 443}, {"port": 8080, "protocol": "TCP"}]},
    "backup": {"schedule": "0 3 * * *"},
    "tags": {"owner": "bench", "cost-center": "cc-%d"}
  }
}
`, n%benchTypes, n, n%7, 1+n%1000, regions[n%3], n%13, n/256%256, n%256, n%50)
	}
	return fmt.Sprintf(`apiVersion: bench.example.com/v1
kind: Kind%d
metadata:
  name: res-%05d
  labels:
    team: t%d
    env: prod
  annotations:
    example.com/owner: "team-%d"
spec:
  size: %d
  region: %s
  owner: team-%d
  note: null
  network:
    cidr: 10.%d.%d.0/24
    ports:
      - port: 443
      - port: 8080
        protocol: TCP
  backup:
    schedule: "0 3 * * *"
    retentionDays: 14
  tags:
    owner: bench
    cost-center: cc-%d
`, n%benchTypes, n, n%7, n%13, 1+n%1000, regions[n%3], n%13, n/256%256, n%256, n%50)
}

// writeBenchTree writes the benchmark tree under dir.
func writeBenchTree(tb testing.TB, dir string) {
	tb.Helper()
	write := func(rel, data string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	var types strings.Builder
	for i := range benchTypes {
		types.WriteString("---\n" + benchTypeDoc(i))
	}
	write("types.yaml", types.String())
	for n := range benchResources {
		ext := ".yaml"
		if n%10 == 9 {
			ext = ".json"
		}
		write(fmt.Sprintf("kind%d/res-%05d%s", n%benchTypes, n, ext), benchResourceDoc(n))
	}
}

// benchTreeDir returns a folder holding the benchmark tree, written once per
// benchmark; NO8S_BENCH_TREE names a folder to write it to and keep instead,
// for timing the built binary or another validator on the same files.
func benchTreeDir(b *testing.B) string {
	b.Helper()
	dir := os.Getenv("NO8S_BENCH_TREE")
	if dir == "" {
		dir = b.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "types.yaml")); err != nil {
		writeBenchTree(b, dir)
	}
	return dir
}

// BenchmarkValidateTree reads and validates the whole tree from scratch,
// as `no8s-agent validate` and an agent's first sync do.
func BenchmarkValidateTree(b *testing.B) {
	dir := benchTreeDir(b)
	for b.Loop() {
		files, ps, err := ReadDir(dir, LoadOptions{})
		if err != nil || len(ps) > 0 {
			b.Fatal(err, ps)
		}
		var v Validator
		set, err := v.ValidateFiles(files, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(set.Resources) != benchResources {
			b.Fatalf("%d resources", len(set.Resources))
		}
	}
}

// BenchmarkValidatorOneFileChanged validates a snapshot that differs from the
// previous one by one file, as a sync of a one-file commit does.
func BenchmarkValidatorOneFileChanged(b *testing.B) {
	files, _, err := ReadDir(benchTreeDir(b), LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var v Validator
	if _, err := v.ValidateFiles(files, nil); err != nil {
		b.Fatal(err)
	}
	i := len(files) / 2
	orig := files[i]
	for n := 0; b.Loop(); n++ {
		data := strings.Replace(string(orig.Data), "retentionDays: 14", fmt.Sprintf("retentionDays: %d", 15+n%300), 1)
		files[i] = File{Path: orig.Path, Data: []byte(data), Hash: HashJSON([]byte(data))}
		if _, err := v.ValidateFiles(files, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidatorRetained reports the heap a Validator keeps between
// calls for the tree: what an idle agent holds for one source.
func BenchmarkValidatorRetained(b *testing.B) {
	dir := benchTreeDir(b)
	var retained uint64
	for b.Loop() {
		before := heapAfterGC()
		files, _, err := ReadDir(dir, LoadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		v := &Validator{}
		if _, err := v.ValidateFiles(files, nil); err != nil {
			b.Fatal(err)
		}
		files = nil
		retained = heapAfterGC() - before
		runtime.KeepAlive(v)
	}
	b.ReportMetric(float64(retained), "retained-B")
	b.ReportMetric(float64(retained)/benchResources, "retained-B/resource")
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
