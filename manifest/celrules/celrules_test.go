package celrules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// fromYAML decodes YAML as the agent's manifests are decoded: objects as
// map[string]any, numbers as float64.
func fromYAML(t *testing.T, src string) any {
	t.Helper()
	if src == "" {
		return nil
	}
	var v any
	if err := yaml.Unmarshal([]byte(src), &v); err != nil {
		t.Fatalf("decoding %q: %v", src, err)
	}
	return v
}

// compileYAML compiles a schema written in YAML, failing the test on error.
func compileYAML(t *testing.T, src string) *Rules {
	t.Helper()
	schema, _ := fromYAML(t, src).(map[string]any)
	rules, err := Compile(schema)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return rules
}

// scalingSchema is the schema of a spec with replicas bounds, used by
// several cases.
const scalingSchema = `
type: object
properties:
  replicas: {type: integer}
  minReplicas: {type: integer}
x-kubernetes-validations:
- rule: self.minReplicas <= self.replicas
  message: minReplicas must not exceed replicas
`

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		obj    string
		old    string // empty: a create
		want   []Violation
	}{
		{
			name:   "simple rule passes",
			schema: scalingSchema,
			obj:    `{replicas: 3, minReplicas: 1}`,
		},
		{
			name:   "simple rule fails with its message",
			schema: scalingSchema,
			obj:    `{replicas: 1, minReplicas: 3}`,
			want: []Violation{{
				Message: "minReplicas must not exceed replicas", Reason: ReasonInvalid,
				Rule: "self.minReplicas <= self.replicas",
			}},
		},
		{
			name: "rule without a message fails with Kubernetes' default one",
			schema: `
type: object
properties:
  replicas: {type: integer, x-kubernetes-validations: [{rule: "self % 2 == 1"}]}
`,
			obj: `{replicas: 2}`,
			want: []Violation{{
				Path: "/replicas", Field: "replicas", Message: "failed rule: self % 2 == 1",
				Reason: ReasonInvalid, Rule: "self % 2 == 1",
			}},
		},
		{
			name: "messageExpression gives the message",
			schema: `
type: object
properties:
  name: {type: string, maxLength: 63}
  replicas: {type: integer}
  minReplicas: {type: integer}
x-kubernetes-validations:
- rule: self.minReplicas <= self.replicas
  message: static message
  messageExpression: "self.name + ' needs at least as many replicas as its minimum'"
`,
			obj: `{name: web, replicas: 1, minReplicas: 3}`,
			want: []Violation{{
				Message: "web needs at least as many replicas as its minimum", Reason: ReasonInvalid,
				Rule: "self.minReplicas <= self.replicas",
			}},
		},
		{
			name: "a messageExpression that fails falls back to the message",
			schema: `
type: object
properties:
  replicas: {type: integer}
  note: {type: string}
x-kubernetes-validations:
- rule: self.replicas > 0
  message: replicas must be positive
  messageExpression: "'replicas must be positive: ' + self.note"
`,
			obj: `{replicas: 0}`,
			want: []Violation{{
				Message: "replicas must be positive", Reason: ReasonInvalid, Rule: "self.replicas > 0",
			}},
		},
		{
			name: "fieldPath names the field reported",
			schema: `
type: object
properties:
  replicas: {type: integer}
  minReplicas: {type: integer}
x-kubernetes-validations:
- rule: self.minReplicas <= self.replicas
  message: minReplicas must not exceed replicas
  fieldPath: .minReplicas
`,
			obj: `{replicas: 1, minReplicas: 3}`,
			want: []Violation{{
				Path: "/minReplicas", Field: "minReplicas", Message: "minReplicas must not exceed replicas",
				Reason: ReasonInvalid, Rule: "self.minReplicas <= self.replicas",
			}},
		},
		{
			name: "fieldPath into a map with a quoted key",
			schema: `
type: object
properties:
  labels: {type: object, additionalProperties: {type: string}}
x-kubernetes-validations:
- rule: "!has(self.labels) || !('app.kubernetes.io/name' in self.labels) || self.labels['app.kubernetes.io/name'] != ''"
  message: the name label must not be empty
  fieldPath: ".labels['app.kubernetes.io/name']"
`,
			obj: `{labels: {app.kubernetes.io/name: ""}}`,
			want: []Violation{{
				Path: "/labels/app.kubernetes.io~1name", Field: "labels[app.kubernetes.io/name]",
				Message: "the name label must not be empty", Reason: ReasonInvalid,
				Rule: "!has(self.labels) || !('app.kubernetes.io/name' in self.labels) || self.labels['app.kubernetes.io/name'] != ''",
			}},
		},
		{
			name: "reason",
			schema: `
type: object
properties:
  tls: {type: boolean}
  certificate: {type: string}
  debug: {type: boolean}
x-kubernetes-validations:
- rule: "!self.tls || has(self.certificate)"
  message: a certificate is required with TLS
  fieldPath: .certificate
  reason: FieldValueRequired
- rule: "!has(self.debug)"
  message: debug may not be set
  reason: FieldValueForbidden
`,
			obj: `{tls: true, debug: true}`,
			want: []Violation{
				{Path: "/certificate", Field: "certificate", Message: "a certificate is required with TLS", Reason: ReasonRequired, Rule: "!self.tls || has(self.certificate)"},
				{Message: "debug may not be set", Reason: ReasonForbidden, Rule: "!has(self.debug)"},
			},
		},
		{
			name: "rule on a nested object",
			schema: `
type: object
properties:
  template:
    type: object
    properties:
      port: {type: integer}
      targetPort: {type: integer}
    x-kubernetes-validations:
    - rule: "!has(self.targetPort) || self.targetPort >= self.port"
      message: targetPort must not be below port
`,
			obj: `{template: {port: 8080, targetPort: 80}}`,
			want: []Violation{{
				Path: "/template", Field: "template", Message: "targetPort must not be below port",
				Reason: ReasonInvalid, Rule: "!has(self.targetPort) || self.targetPort >= self.port",
			}},
		},
		{
			name: "rule on the items of a map-type list",
			schema: `
type: object
properties:
  ports:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    items:
      type: object
      required: [name]
      properties:
        name: {type: string}
        port: {type: integer}
      x-kubernetes-validations:
      - rule: self.port >= 1 && self.port <= 65535
        messageExpression: "'port ' + self.name + ' is out of range'"
`,
			obj: `{ports: [{name: http, port: 80}, {name: admin, port: 70000}]}`,
			want: []Violation{{
				Path: "/ports/1", Field: "ports[1]", Message: "port admin is out of range",
				Reason: ReasonInvalid, Rule: "self.port >= 1 && self.port <= 65535",
			}},
		},
		{
			name: "rule on a set-type list",
			schema: `
type: object
properties:
  zones:
    type: array
    x-kubernetes-list-type: set
    maxItems: 10
    items: {type: string}
    x-kubernetes-validations:
    - rule: self.all(z, z.startsWith('eu-'))
      message: every zone must be in Europe
`,
			obj: `{zones: [eu-west-1, us-east-1]}`,
			want: []Violation{{
				Path: "/zones", Field: "zones", Message: "every zone must be in Europe",
				Reason: ReasonInvalid, Rule: "self.all(z, z.startsWith('eu-'))",
			}},
		},
		{
			name: "rule on the values of a map",
			schema: `
type: object
properties:
  labels:
    type: object
    additionalProperties:
      type: string
      x-kubernetes-validations:
      - rule: self.size() <= 63
        message: a label value has at most 63 characters
`,
			obj: `{labels: {app: web, tier: ` + strings.Repeat("x", 64) + `}}`,
			want: []Violation{{
				Path: "/labels/tier", Field: "labels[tier]", Message: "a label value has at most 63 characters",
				Reason: ReasonInvalid, Rule: "self.size() <= 63",
			}},
		},
		{
			name: "transition rule fails on an update that changes the value",
			schema: `
type: object
properties:
  region: {type: string, x-kubernetes-validations: [{rule: self == oldSelf, message: region is immutable}]}
  size: {type: integer}
`,
			obj: `{region: eu-west-1, size: 2}`,
			old: `{region: us-east-1, size: 1}`,
			want: []Violation{{
				Path: "/region", Field: "region", Message: "region is immutable", Reason: ReasonInvalid, Rule: "self == oldSelf",
			}},
		},
		{
			name: "transition rule is not evaluated on a create",
			schema: `
type: object
properties:
  region: {type: string, x-kubernetes-validations: [{rule: self == oldSelf, message: region is immutable}]}
`,
			obj: `{region: eu-west-1}`,
		},
		{
			name: "transition rule passes on an update that keeps the value",
			schema: `
type: object
properties:
  region: {type: string, x-kubernetes-validations: [{rule: self == oldSelf, message: region is immutable}]}
  size: {type: integer}
`,
			obj: `{region: eu-west-1, size: 2}`,
			old: `{region: eu-west-1, size: 1}`,
		},
		{
			name: "transition rule on a field only the new object has is not evaluated",
			schema: `
type: object
properties:
  region: {type: string}
  storageGB: {type: integer, x-kubernetes-validations: [{rule: self >= oldSelf, message: storage cannot shrink}]}
`,
			obj: `{region: eu-west-1, storageGB: 10}`,
			old: `{region: eu-west-1}`,
		},
		{
			name: "transition rule on a field both objects have",
			schema: `
type: object
properties:
  region: {type: string}
  storageGB: {type: integer, x-kubernetes-validations: [{rule: self >= oldSelf, message: storage cannot shrink}]}
`,
			obj: `{region: eu-west-1, storageGB: 10}`,
			old: `{region: eu-west-1, storageGB: 20}`,
			want: []Violation{{
				Path: "/storageGB", Field: "storageGB", Message: "storage cannot shrink", Reason: ReasonInvalid, Rule: "self >= oldSelf",
			}},
		},
		{
			name: "transition rule pairs map-list items by key",
			schema: `
type: object
properties:
  volumes:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    items:
      type: object
      required: [name]
      properties:
        name: {type: string}
        sizeGB: {type: integer}
      x-kubernetes-validations:
      - rule: self.sizeGB >= oldSelf.sizeGB
        messageExpression: "'volume ' + self.name + ' cannot shrink'"
`,
			obj: `{volumes: [{name: new, sizeGB: 1}, {name: data, sizeGB: 5}, {name: logs, sizeGB: 1}]}`,
			old: `{volumes: [{name: logs, sizeGB: 1}, {name: data, sizeGB: 8}]}`,
			want: []Violation{{
				Path: "/volumes/1", Field: "volumes[1]", Message: "volume data cannot shrink",
				Reason: ReasonInvalid, Rule: "self.sizeGB >= oldSelf.sizeGB",
			}},
		},
		{
			name: "optionalOldSelf rule is evaluated on a create",
			schema: `
type: object
properties:
  version:
    type: string
    x-kubernetes-validations:
    - rule: oldSelf.hasValue() || self.startsWith('v1')
      message: a new resource starts at v1
      optionalOldSelf: true
`,
			obj: `{version: v2}`,
			want: []Violation{{
				Path: "/version", Field: "version", Message: "a new resource starts at v1",
				Reason: ReasonInvalid, Rule: "oldSelf.hasValue() || self.startsWith('v1')",
			}},
		},
		{
			name:   "a failing value left unchanged by an update is ratcheted",
			schema: scalingSchema,
			obj:    `{replicas: 1, minReplicas: 3}`,
			old:    `{replicas: 1, minReplicas: 3}`,
		},
		{
			name:   "a failing value changed by an update is reported",
			schema: scalingSchema,
			obj:    `{replicas: 1, minReplicas: 3}`,
			old:    `{replicas: 2, minReplicas: 3}`,
			want: []Violation{{
				Message: "minReplicas must not exceed replicas", Reason: ReasonInvalid, Rule: "self.minReplicas <= self.replicas",
			}},
		},
		{
			name: "Kubernetes URL functions",
			schema: `
type: object
properties:
  endpoint:
    type: string
    maxLength: 2048
    x-kubernetes-validations:
    - {rule: isURL(self), message: must be a URL}
    - {rule: "!isURL(self) || url(self).getScheme() == 'https'", message: must use https}
    - {rule: "!isURL(self) || url(self).getHost().endsWith('.example.com')", message: must be a host of example.com}
`,
			obj: `{endpoint: "http://api.example.org/v1"}`,
			want: []Violation{
				{Path: "/endpoint", Field: "endpoint", Message: "must use https", Reason: ReasonInvalid, Rule: "!isURL(self) || url(self).getScheme() == 'https'"},
				{Path: "/endpoint", Field: "endpoint", Message: "must be a host of example.com", Reason: ReasonInvalid, Rule: "!isURL(self) || url(self).getHost().endsWith('.example.com')"},
			},
		},
		{
			name: "Kubernetes quantity functions",
			schema: `
type: object
properties:
  memory: {type: string, maxLength: 64}
  limit: {type: string, maxLength: 64}
x-kubernetes-validations:
- rule: isQuantity(self.memory) && isQuantity(self.limit) && quantity(self.memory).isLessThan(quantity(self.limit))
  message: memory must be below its limit
`,
			obj: `{memory: 2Gi, limit: 1500Mi}`,
			want: []Violation{{
				Message: "memory must be below its limit", Reason: ReasonInvalid,
				Rule: "isQuantity(self.memory) && isQuantity(self.limit) && quantity(self.memory).isLessThan(quantity(self.limit))",
			}},
		},
		{
			name: "regular expressions",
			schema: `
type: object
properties:
  name:
    type: string
    maxLength: 63
    x-kubernetes-validations:
    - rule: self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')
      messageExpression: "'invalid name ' + self + ': must be a DNS label'"
`,
			obj: `{name: Web_1}`,
			want: []Violation{{
				Path: "/name", Field: "name", Message: "invalid name Web_1: must be a DNS label",
				Reason: ReasonInvalid, Rule: "self.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
			}},
		},
		{
			name: "int-or-string values",
			schema: `
type: object
properties:
  maxUnavailable:
    x-kubernetes-int-or-string: true
    x-kubernetes-validations:
    - rule: "type(self) == int ? self >= 0 : self.endsWith('%')"
      message: must be a count or a percentage
`,
			obj: `{maxUnavailable: "25"}`,
			want: []Violation{{
				Path: "/maxUnavailable", Field: "maxUnavailable", Message: "must be a count or a percentage",
				Reason: ReasonInvalid, Rule: "type(self) == int ? self >= 0 : self.endsWith('%')",
			}},
		},
		{
			name: "defaults are not applied",
			schema: `
type: object
properties:
  mode: {type: string, default: fast}
x-kubernetes-validations:
- rule: self.mode == 'fast'
`,
			obj: `{}`,
			want: []Violation{{
				Message: "no such key: mode evaluating rule: self.mode == 'fast'", Reason: ReasonInvalid, Rule: "self.mode == 'fast'",
			}},
		},
		{
			name: "a whole resource exposes metadata.name as Kubernetes does",
			schema: `
type: object
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    properties:
      prefix: {type: string, maxLength: 16}
x-kubernetes-validations:
- rule: self.metadata.name.startsWith(self.spec.prefix)
  messageExpression: "'name must start with ' + self.spec.prefix"
  fieldPath: .spec.prefix
`,
			obj: `{apiVersion: example.com/v1, kind: Database, metadata: {name: orders, namespace: shop}, spec: {prefix: db-}}`,
			want: []Violation{{
				Path: "/spec/prefix", Field: "spec.prefix", Message: "name must start with db-",
				Reason: ReasonInvalid, Rule: "self.metadata.name.startsWith(self.spec.prefix)",
			}},
		},
		{
			name: "an embedded resource exposes its kind and name",
			schema: `
type: object
properties:
  template:
    type: object
    x-kubernetes-embedded-resource: true
    x-kubernetes-preserve-unknown-fields: true
    x-kubernetes-validations:
    - rule: self.kind == 'ConfigMap' && self.metadata.name.startsWith('cfg-')
      message: the template must be a ConfigMap named cfg-*
`,
			obj: `{template: {apiVersion: v1, kind: ConfigMap, metadata: {name: settings}, data: {a: b}}}`,
			want: []Violation{{
				Path: "/template", Field: "template", Message: "the template must be a ConfigMap named cfg-*",
				Reason: ReasonInvalid, Rule: "self.kind == 'ConfigMap' && self.metadata.name.startsWith('cfg-')",
			}},
		},
		{
			name: "a field named like a CEL keyword is escaped",
			schema: `
type: object
properties:
  namespace: {type: string}
  dns-name: {type: string}
x-kubernetes-validations:
- rule: self.__namespace__ != 'kube-system' && self.dns__dash__name != ''
  message: not in kube-system, with a DNS name
`,
			obj: `{namespace: kube-system, dns-name: x}`,
			want: []Violation{{
				Message: "not in kube-system, with a DNS name", Reason: ReasonInvalid,
				Rule: "self.__namespace__ != 'kube-system' && self.dns__dash__name != ''",
			}},
		},
		{
			name: "a runtime error is reported, and the other rules still run",
			schema: `
type: object
properties:
  total: {type: integer}
  parts: {type: integer}
x-kubernetes-validations:
- rule: self.total / self.parts > 1
- rule: self.total > 10
  message: total must exceed 10
`,
			obj: `{total: 4, parts: 0}`,
			want: []Violation{
				{Message: "division by zero evaluating rule: self.total / self.parts > 1", Reason: ReasonInvalid, Rule: "self.total / self.parts > 1"},
				{Message: "total must exceed 10", Reason: ReasonInvalid, Rule: "self.total > 10"},
			},
		},
		{
			name: "null values are not validated",
			schema: `
type: object
properties:
  owner: {type: string, nullable: true, x-kubernetes-validations: [{rule: "self != ''"}]}
`,
			obj: `{owner: null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rules := compileYAML(t, tt.schema)
			got := rules.Validate(context.Background(), fromYAML(t, tt.obj), fromYAML(t, tt.old))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestValidateNumbers(t *testing.T) {
	t.Parallel()
	rules := compileYAML(t, `
type: object
properties:
  replicas: {type: integer}
  ratio: {type: number}
x-kubernetes-validations:
- rule: self.replicas <= 5 && self.ratio < 1.0
  message: too many
`)
	tests := []struct {
		name string
		obj  map[string]any
		fail bool
	}{
		{"float64", map[string]any{"replicas": float64(3), "ratio": 0.5}, false},
		{"json.Number", map[string]any{"replicas": json.Number("7"), "ratio": json.Number("0.5")}, true},
		{"int", map[string]any{"replicas": 3, "ratio": 0}, false},
		{"int64 and whole ratio", map[string]any{"replicas": int64(3), "ratio": json.Number("1")}, true},
		{"uint8", map[string]any{"replicas": uint8(9), "ratio": float32(0.25)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := rules.Validate(context.Background(), tt.obj, nil)
			if (len(got) > 0) != tt.fail {
				t.Fatalf("Validate = %v, want failure %v", got, tt.fail)
			}
			if tt.fail && got[0].Message != "too many" {
				t.Errorf("message %q, want %q", got[0].Message, "too many")
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		schema  string
		pointer string
		message string // a part of the problem's message
	}{
		{
			name: "syntax error",
			schema: `
type: object
properties:
  spec:
    type: object
    properties:
      replicas: {type: integer}
    x-kubernetes-validations:
    - rule: self.replicas > 0
    - rule: "self.replicas > "
`,
			pointer: "/properties/spec/x-kubernetes-validations/1/rule",
			message: "Syntax error",
		},
		{
			name: "unknown field",
			schema: `
type: object
properties:
  replicas: {type: integer}
x-kubernetes-validations:
- rule: self.replica > 0
`,
			pointer: "/x-kubernetes-validations/0/rule",
			message: "undefined field 'replica'",
		},
		{
			name: "not a boolean",
			schema: `
type: object
properties:
  replicas: {type: integer}
x-kubernetes-validations:
- rule: self.replicas + 1
`,
			pointer: "/x-kubernetes-validations/0/rule",
			message: "cel expression must evaluate to a bool",
		},
		{
			name: "type mismatch",
			schema: `
type: object
properties:
  replicas: {type: integer}
x-kubernetes-validations:
- rule: self.replicas == 'three'
`,
			pointer: "/x-kubernetes-validations/0/rule",
			message: "no matching overload",
		},
		{
			name: "estimated cost too high: nested loops over an unbounded list",
			schema: `
type: object
properties:
  hosts:
    type: array
    items: {type: string}
    x-kubernetes-validations:
    - rule: self.all(a, self.all(b, a == b || !a.endsWith(b)))
`,
			pointer: "/properties/hosts/x-kubernetes-validations/0/rule",
			message: "estimated rule cost exceeds budget by factor of more than 100x",
		},
		{
			name: "estimated cost too high: a rule on the items of an unbounded list of unbounded strings",
			schema: `
type: object
properties:
  hosts:
    type: array
    items:
      type: string
      x-kubernetes-validations:
      - rule: self.matches('^([a-z0-9]+[.])*example[.]com$')
`,
			pointer: "/properties/hosts/items/x-kubernetes-validations/0/rule",
			message: "estimated rule cost exceeds budget",
		},
		{
			name: "transition rule on the items of an atomic list",
			schema: `
type: object
properties:
  hosts:
    type: array
    maxItems: 8
    items:
      type: string
      x-kubernetes-validations:
      - rule: self == oldSelf
`,
			pointer: "/properties/hosts/items/x-kubernetes-validations/0/rule",
			message: "oldSelf cannot be used on the uncorrelatable portion of the schema within /properties/hosts",
		},
		{
			name: "transition rule below the items of a set",
			schema: `
type: object
properties:
  peers:
    type: array
    x-kubernetes-list-type: set
    maxItems: 8
    items:
      type: object
      x-kubernetes-map-type: atomic
      properties:
        address:
          type: string
          x-kubernetes-validations:
          - rule: self == oldSelf
`,
			pointer: "/properties/peers/items/properties/address/x-kubernetes-validations/0/rule",
			message: "oldSelf cannot be used on the uncorrelatable portion of the schema within /properties/peers",
		},
		{
			name: "optionalOldSelf without oldSelf",
			schema: `
type: object
properties:
  name: {type: string, x-kubernetes-validations: [{rule: "self != ''", optionalOldSelf: true}]}
`,
			pointer: "/properties/name/x-kubernetes-validations/0/optionalOldSelf",
			message: "may not be set if oldSelf is not used in rule",
		},
		{
			name: "unsupported reason",
			schema: `
type: object
properties:
  name: {type: string, x-kubernetes-validations: [{rule: "self != ''", reason: FieldValueWrong}]}
`,
			pointer: "/properties/name/x-kubernetes-validations/0/reason",
			message: `unsupported value "FieldValueWrong"`,
		},
		{
			name: "fieldPath naming no field",
			schema: `
type: object
properties:
  name: {type: string}
x-kubernetes-validations:
- rule: self.name != ''
  fieldPath: .nmae
`,
			pointer: "/x-kubernetes-validations/0/fieldPath",
			message: "must be a valid path",
		},
		{
			name: "messageExpression not a string",
			schema: `
type: object
properties:
  name: {type: string}
x-kubernetes-validations:
- rule: self.name != ''
  messageExpression: self.name.size()
`,
			pointer: "/x-kubernetes-validations/0/messageExpression",
			message: "messageExpression must evaluate to a string",
		},
		{
			name: "rule on several lines without a message",
			schema: `
type: object
properties:
  name: {type: string}
x-kubernetes-validations:
- rule: |-
    self.name != ''
    && self.name != 'x'
`,
			pointer: "/x-kubernetes-validations/0/message",
			message: "message must be specified if rule contains line breaks",
		},
		{
			name: "empty rule",
			schema: `
type: object
x-kubernetes-validations:
- rule: "  "
`,
			pointer: "/x-kubernetes-validations/0/rule",
			message: "rule is not specified",
		},
		{
			name: "unknown list type",
			schema: `
type: object
properties:
  ports:
    type: array
    x-kubernetes-list-type: ordered
    items: {type: integer}
    x-kubernetes-validations:
    - rule: self.size() > 0
`,
			pointer: "/properties/ports/x-kubernetes-list-type",
			message: `unsupported value "ordered"`,
		},
		{
			name: "rule inside allOf",
			schema: `
type: object
properties:
  name: {type: string}
allOf:
- x-kubernetes-validations:
  - rule: self.name != ''
`,
			pointer: "/allOf/0/x-kubernetes-validations",
			message: "rules are not evaluated inside allOf",
		},
		{
			name: "rule in a schema without a type",
			schema: `
type: object
properties:
  anything:
    x-kubernetes-validations:
    - rule: self != null
`,
			pointer: "/properties/anything/x-kubernetes-validations",
			message: "no type CEL can give to self",
		},
		{
			name: "$ref",
			schema: `
type: object
properties:
  name: {$ref: "#/definitions/name"}
x-kubernetes-validations:
- rule: has(self.name)
definitions:
  name: {type: string}
`,
			pointer: "/properties/name/$ref",
			message: "$ref is not supported",
		},
		{
			name: "a list of types",
			schema: `
type: object
properties:
  name: {type: [string, "null"]}
x-kubernetes-validations:
- rule: has(self.name)
`,
			pointer: "/properties/name/type",
			message: "must be a single type name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			schema, _ := fromYAML(t, tt.schema).(map[string]any)
			rules, err := Compile(schema)
			if err == nil {
				t.Fatalf("Compile succeeded with %d rules, want an error at %s", rules.Len(), tt.pointer)
			}
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error %T %v, want a *CompileError", err, err)
			}
			for _, p := range ce.Problems {
				if p.Pointer == tt.pointer && strings.Contains(p.Message, tt.message) {
					if !strings.Contains(err.Error(), p.Pointer) {
						t.Errorf("error text does not name %s:\n%v", p.Pointer, err)
					}
					return
				}
			}
			t.Errorf("no problem at %s saying %q:\n%v", tt.pointer, tt.message, err)
		})
	}
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		rules  int
	}{
		{
			name: "nested loops over a bounded list",
			schema: `
type: object
properties:
  hosts:
    type: array
    maxItems: 20
    items: {type: string, maxLength: 253}
    x-kubernetes-validations:
    - rule: self.all(a, self.all(b, a == b || !a.endsWith(b)))
`,
			rules: 1,
		},
		{
			name: "transition rule on the items of a map-type list",
			schema: `
type: object
properties:
  volumes:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [name]
    items:
      type: object
      required: [name]
      properties:
        name: {type: string}
        sizeGB: {type: integer}
      x-kubernetes-validations:
      - rule: self.sizeGB >= oldSelf.sizeGB
`,
			rules: 1,
		},
		{
			name: "no rules, with keywords Kubernetes does not support",
			schema: `
type: object
properties:
  name: {$ref: "#/definitions/name"}
patternProperties:
  "^x-": {type: string}
definitions:
  name: {type: string}
`,
			rules: 0,
		},
		{
			name: "rules beside keywords that do not change types",
			schema: `
type: object
$schema: http://json-schema.org/draft-04/schema#
properties:
  name: {type: string, maxLength: 10}
  extra:
    type: object
    patternProperties:
      "^x-": {type: string}
x-kubernetes-validations:
- rule: self.name != ''
`,
			rules: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := compileYAML(t, tt.schema).Len(); got != tt.rules {
				t.Errorf("Len() = %d, want %d", got, tt.rules)
			}
		})
	}
}

func TestNoRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rules *Rules
	}{
		{"nil", nil},
		{"schema without rules", compileYAML(t, `{type: object, properties: {name: {type: string}}}`)},
		{"empty schema", compileYAML(t, `{}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if n := tt.rules.Len(); n != 0 {
				t.Errorf("Len() = %d", n)
			}
			if got := tt.rules.Validate(context.Background(), map[string]any{"name": 1}, map[string]any{}); got != nil {
				t.Errorf("Validate = %v", got)
			}
		})
	}
}

func TestRuntimeCostLimits(t *testing.T) {
	t.Parallel()
	// Five rules on the items of a bounded list of long strings: each is
	// within the static limit, which counts four bytes a character, but
	// all of them over a full list of ASCII strings cost more than the
	// budget Kubernetes gives one object. Searching for a long substring
	// costs much and takes little time, which keeps the test fast.
	needle := "'" + strings.Repeat("b", 100) + "'"
	budgetSchema := `
type: object
properties:
  blobs:
    type: array
    maxItems: 10
    items:
      type: string
      maxLength: 240000
      x-kubernetes-validations:
      - rule: "!self.contains(` + needle + `)"
      - rule: "!self.contains(` + needle + `) || true"
      - rule: "!self.contains(` + needle + `) || self == ''"
      - rule: "!self.contains(` + needle + `) || self == 'a'"
      - rule: "!self.contains(` + needle + `) || self == 'b'"
`
	// One rule within the static limit whose single evaluation on a long
	// string costs more than Kubernetes allows one call.
	callSchema := `
type: object
properties:
  text:
    type: string
    maxLength: 2000000
    x-kubernetes-validations:
    - rule: "!self.contains(` + needle + `)"
`
	blobs := make([]any, 10)
	for i := range blobs {
		blobs[i] = strings.Repeat("a", 240000)
	}
	tests := []struct {
		name    string
		schema  string
		obj     any
		path    string
		message string
	}{
		{"budget per object", budgetSchema, map[string]any{"blobs": blobs}, "/blobs/", "running out of cost budget"},
		{"limit per call", callSchema, map[string]any{"text": strings.Repeat("a", 1200000)}, "/text", "call cost exceeds limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := compileYAML(t, tt.schema).Validate(context.Background(), tt.obj, nil)
			if len(got) != 1 {
				t.Fatalf("Validate = %v, want one violation", got)
			}
			if !strings.Contains(got[0].Message, tt.message) || !strings.HasPrefix(got[0].Path, tt.path) || got[0].Rule == "" {
				t.Errorf("violation %#v, want one at %s saying %q", got[0], tt.path, tt.message)
			}
		})
	}
}

func TestValidateCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := compileYAML(t, scalingSchema).Validate(ctx, map[string]any{"replicas": 1, "minReplicas": 3}, nil)
	want := []Violation{{Message: "validation stopped: context canceled", Reason: ReasonInternal}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Validate = %#v, want %#v", got, want)
	}
}

func TestValidateConcurrently(t *testing.T) {
	t.Parallel()
	rules := compileYAML(t, scalingSchema)
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			obj := map[string]any{"replicas": i, "minReplicas": 8}
			got := rules.Validate(context.Background(), obj, map[string]any{"replicas": 8, "minReplicas": 8})
			if fail := i < 8; (len(got) == 1) != fail {
				errs <- fmt.Sprintf("replicas %d: %v", i, got)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestValidateDoesNotModify(t *testing.T) {
	t.Parallel()
	rules := compileYAML(t, scalingSchema)
	obj := map[string]any{"replicas": json.Number("1"), "minReplicas": float64(3)}
	rules.Validate(context.Background(), obj, nil)
	want := map[string]any{"replicas": json.Number("1"), "minReplicas": float64(3)}
	if !reflect.DeepEqual(obj, want) {
		t.Errorf("object became %#v", obj)
	}
}

func TestFieldPathTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want []string
	}{
		{".replicas", []string{"replicas"}},
		{".spec.template", []string{"spec", "template"}},
		{".labels['app.kubernetes.io/name']", []string{"labels", "app.kubernetes.io/name"}},
		{`['it\'s'].x`, []string{"it's", "x"}},
		{`.m['tab\there']`, []string{"m", "tab\there"}},
		{"replicas", nil},
		{".", nil},
		{".m['x", nil},
		{`.m['\q']`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			if got := fieldPathTokens(tt.path); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fieldPathTokens(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}
