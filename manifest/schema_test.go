package manifest

import (
	"strings"
	"testing"
)

func TestQuickCheckAgreesWithJSONSchema(t *testing.T) {
	t.Parallel()
	compiled := func(typeDoc string) *compiledSchema {
		t.Helper()
		set, err := Validate(mustDecode(t, "t.yaml", typeDoc), nil)
		if err != nil {
			t.Fatal(err)
		}
		return set.Types[0].Versions[0].compiled
	}
	bench := compiled(benchTypeDoc(0))
	db := compiled(dbType)
	odd := compiled(strings.Replace(strings.Replace(dbType, "required: [engine, storage_gb]", "required: [storage_gb]", 1), "engine: {type: string, enum: [postgres, mysql]}",
		"engine: {type: string, format: email}\n          one: {oneOf: [{type: string}, {type: integer}]}\n          ratio: {type: number, maximum: 1.5, multipleOf: 0.5}\n          uniq: {type: array, uniqueItems: true}", 1))
	spec := func(yaml string) any {
		t.Helper()
		return mustDecode(t, "s.yaml", "spec:\n"+yaml)[0].Object["spec"]
	}
	tests := []struct {
		name   string
		schema *compiledSchema
		spec   string
		// quick is the answer quickCheck must give: a structural schema's
		// valid specs must not fall back to jsonschema.
		quick int
	}{
		{"bench valid", bench, "  size: 1\n  region: eu-west-1\n  owner: team-a\n  note: null\n  network: {cidr: 10.0.0.0/24, ports: [{port: 1}, {port: 65535, protocol: UDP}]}\n  tags: {a: b}\n", quickValid},
		{"bench minimal", bench, "  size: 100000\n  region: ap-south-1\n  owner: ab\n", quickValid},
		{"bench missing required", bench, "  size: 1\n  region: eu-west-1\n", quickInvalid},
		{"bench below minimum", bench, "  size: 0\n  region: eu-west-1\n  owner: ab\n", quickInvalid},
		{"bench above maximum", bench, "  size: 100001\n  region: eu-west-1\n  owner: ab\n", quickInvalid},
		{"bench not in enum", bench, "  size: 1\n  region: mars\n  owner: ab\n", quickInvalid},
		{"bench pattern", bench, "  size: 1\n  region: eu-west-1\n  owner: A\n", quickInvalid},
		{"bench wrong type", bench, "  size: '1'\n  region: eu-west-1\n  owner: ab\n", quickInvalid},
		{"bench float for integer", bench, "  size: 1.5\n  region: eu-west-1\n  owner: ab\n", quickUnsure},
		{"bench too long", bench, "  size: 1\n  region: eu-west-1\n  owner: ab\n  tags: {a: " + strings.Repeat("x", 64) + "}\n", quickInvalid},
		{"bench too many items", bench, "  size: 1\n  region: eu-west-1\n  owner: ab\n  network: {ports: [" + strings.Repeat("{port: 1}, ", 16) + "{port: 2}]}\n", quickInvalid},
		{"bench item missing required", bench, "  size: 1\n  region: eu-west-1\n  owner: ab\n  network: {ports: [{protocol: TCP}]}\n", quickInvalid},
		{"bench null where not nullable", bench, "  size: 1\n  region: eu-west-1\n  owner: ab\n  tier: null\n", quickInvalid},
		{"bench huge number", bench, "  size: 123456789012345678901234567890\n  region: eu-west-1\n  owner: ab\n", quickUnsure},
		{"db valid", db, "  engine: postgres\n  storage_gb: 10\n  tier: null\n  comment: null\n  nodes: [{size: big}]\n  tags: {x: {on: false}}\n  x-ignored: anything\n  unknown: kept\n", quickValid},
		{"db nullable enum", db, "  engine: mysql\n  storage_gb: 10\n  tier: bronze\n", quickInvalid},
		{"db nested additional", db, "  engine: mysql\n  storage_gb: 10\n  tags: {x: {on: 1}}\n", quickInvalid},
		{"odd format", odd, "  engine: a@b.c\n  storage_gb: 10\n", quickUnsure},
		{"odd oneOf", odd, "  one: 1\n  storage_gb: 10\n", quickUnsure},
		{"odd multipleOf", odd, "  ratio: 1\n  storage_gb: 10\n", quickUnsure},
		{"odd uniqueItems", odd, "  uniq: [1, 1]\n  storage_gb: 10\n", quickUnsure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := spec(tt.spec)
			got := quickCheck(tt.schema.validator, v)
			if got != tt.quick {
				t.Errorf("quickCheck = %d, want %d", got, tt.quick)
			}
			err := tt.schema.validator.Validate(v)
			if got == quickValid && err != nil {
				t.Errorf("quickCheck says valid, jsonschema says %v", err)
			}
			if got == quickInvalid && err == nil {
				t.Error("quickCheck says invalid, jsonschema says valid")
			}
		})
	}
}
