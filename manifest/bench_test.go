package manifest

import (
	"fmt"
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

// generatedFiles returns a repository of types and resources as files:
// one file per type, and one file of 100 resources per (type, hundred).
func generatedFiles(types, resources int) map[string][]byte {
	files := map[string][]byte{}
	for t := 0; t < types; t++ {
		files[fmt.Sprintf("types/kind%d.yaml", t)] = []byte(fmt.Sprintf(`apiVersion: no8s.io/v1
kind: ResourceType
metadata:
  name: Kind%d
spec:
  group: bench.example.com
  versions:
    - name: v1
      schema:
        type: object
        required: [size, region]
        properties:
          size: {type: integer, minimum: 1}
          region: {type: string, enum: [eu, us, ap]}
          replicas: {type: integer, default: 1}
          tags: {type: object, additionalProperties: {type: string}}
          window: {type: object, default: {}, properties: {day: {type: string, default: sun}}}
`, t))
	}
	var sb strings.Builder
	for r := 0; r < resources; r++ {
		t := r % types
		fmt.Fprintf(&sb, "---\napiVersion: bench.example.com/v1\nkind: Kind%d\nmetadata:\n  name: res-%d\n  labels: {team: t%d}\nspec:\n  size: %d\n  region: eu\n  tags: {owner: bench, cost: c%d}\n", t, r, r%7, r+1, r%13)
		if r%100 == 99 || r == resources-1 {
			files[fmt.Sprintf("resources/r%05d.yaml", r/100)] = []byte(sb.String())
			sb.Reset()
		}
	}
	return files
}

// BenchmarkParseAndValidate measures decoding and validating 10 types and
// 1,000 resources from memory (no file system): the parse-only cost of a sync.
func BenchmarkParseAndValidate(b *testing.B) {
	files := generatedFiles(10, 1000)
	var size int64
	for _, f := range files {
		size += int64(len(f))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		var docs []*Document
		for name, data := range files {
			d, ps := DecodeFile(name, data, DecodeOptions{})
			if len(ps) > 0 {
				b.Fatal(ps)
			}
			docs = append(docs, d...)
		}
		set, err := Validate(docs, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(set.Resources) != 1000 {
			b.Fatalf("%d resources", len(set.Resources))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "µs/resource")
}
