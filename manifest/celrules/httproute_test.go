package celrules

import (
	"context"
	"reflect"
	"testing"
)

// httpRouteSchema is an excerpt, written for this test, of the kind of
// openAPIV3Schema Gateway API's HTTPRoute CRD has: a whole resource at the
// root, bounded lists, a property named like a CEL keyword (namespace),
// rules on lists, on list items and on nested objects, duration and
// has() checks. Defaults are declared but, as in the API server, applied
// before validation by the caller.
const httpRouteSchema = `
type: object
required: [spec]
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    properties:
      hostnames:
        type: array
        maxItems: 16
        items:
          type: string
          minLength: 1
          maxLength: 253
          pattern: '^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'
      parentRefs:
        type: array
        maxItems: 32
        items:
          type: object
          required: [name]
          properties:
            group: {type: string, default: gateway.networking.k8s.io, maxLength: 253}
            kind: {type: string, default: Gateway, minLength: 1, maxLength: 63}
            name: {type: string, minLength: 1, maxLength: 253}
            namespace: {type: string, minLength: 1, maxLength: 63}
            sectionName: {type: string, minLength: 1, maxLength: 253}
            port: {type: integer, format: int32, minimum: 1, maximum: 65535}
        x-kubernetes-validations:
        - message: sectionName or port must be specified when parentRefs includes 2 or more references to the same parent
          rule: "self.all(p1, self.all(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__)) ? ((!has(p1.sectionName) || p1.sectionName == '') == (!has(p2.sectionName) || p2.sectionName == '') && (!has(p1.port) || p1.port == 0) == (!has(p2.port) || p2.port == 0)) : true))"
        - message: sectionName or port must be unique when parentRefs includes 2 or more references to the same parent
          rule: "self.all(p1, self.exists_one(p2, p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && (((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && p1.__namespace__ == p2.__namespace__)) && (((!has(p1.sectionName) || p1.sectionName == '') && (!has(p2.sectionName) || p2.sectionName == '')) || (has(p1.sectionName) && has(p2.sectionName) && p1.sectionName == p2.sectionName)) && (((!has(p1.port) || p1.port == 0) && (!has(p2.port) || p2.port == 0)) || (has(p1.port) && has(p2.port) && p1.port == p2.port))))"
      rules:
        type: array
        maxItems: 16
        items:
          type: object
          properties:
            name: {type: string, minLength: 1, maxLength: 253}
            matches:
              type: array
              maxItems: 64
              items:
                type: object
                properties:
                  path:
                    type: object
                    properties:
                      type: {type: string, enum: [Exact, PathPrefix, RegularExpression], default: PathPrefix}
                      value: {type: string, maxLength: 1024, default: /}
                    x-kubernetes-validations:
                    - message: value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']
                      rule: "(self.type in ['Exact', 'PathPrefix']) ? self.value.startsWith('/') : true"
                    - message: must not contain '//' when type one of ['Exact', 'PathPrefix']
                      rule: "(self.type in ['Exact', 'PathPrefix']) ? !self.value.contains('//') : true"
                    - message: must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']
                      rule: "(self.type in ['Exact', 'PathPrefix']) ? self.value.matches(r\"\"\"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$\"\"\") : true"
                  headers:
                    type: array
                    maxItems: 16
                    x-kubernetes-list-type: map
                    x-kubernetes-list-map-keys: [name]
                    items:
                      type: object
                      required: [name, value]
                      properties:
                        name: {type: string, minLength: 1, maxLength: 256}
                        value: {type: string, minLength: 1, maxLength: 4096}
            filters:
              type: array
              maxItems: 16
              items:
                type: object
                required: [type]
                properties:
                  type: {type: string, enum: [RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite, ExtensionRef]}
                  requestRedirect:
                    type: object
                    properties:
                      hostname: {type: string, maxLength: 253}
                      scheme: {type: string, enum: [http, https]}
                      statusCode: {type: integer, enum: [301, 302], default: 302}
                  urlRewrite:
                    type: object
                    properties:
                      hostname: {type: string, maxLength: 253}
                x-kubernetes-validations:
                - message: filter.requestRedirect must be nil if the filter.type is not RequestRedirect
                  rule: "!(has(self.requestRedirect) && self.type != 'RequestRedirect')"
                - message: filter.requestRedirect must be specified for RequestRedirect filter.type
                  rule: "!(!has(self.requestRedirect) && self.type == 'RequestRedirect')"
                - message: filter.urlRewrite must be nil if the filter.type is not URLRewrite
                  rule: "!(has(self.urlRewrite) && self.type != 'URLRewrite')"
              x-kubernetes-validations:
              - message: May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both
                rule: "!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == 'URLRewrite'))"
              - message: RequestRedirect filter cannot be repeated
                rule: "self.filter(f, f.type == 'RequestRedirect').size() <= 1"
            backendRefs:
              type: array
              maxItems: 16
              items:
                type: object
                required: [name]
                properties:
                  group: {type: string, default: "", maxLength: 253}
                  kind: {type: string, default: Service, minLength: 1, maxLength: 63}
                  name: {type: string, minLength: 1, maxLength: 253}
                  port: {type: integer, format: int32, minimum: 1, maximum: 65535}
                  weight: {type: integer, format: int32, default: 1, minimum: 0, maximum: 1000000}
                x-kubernetes-validations:
                - message: Must have port for Service reference
                  rule: "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true"
            timeouts:
              type: object
              properties:
                request: {type: string, pattern: '^([0-9]{1,5}(h|m|s|ms)){1,4}$'}
                backendRequest: {type: string, pattern: '^([0-9]{1,5}(h|m|s|ms)){1,4}$'}
              x-kubernetes-validations:
              - message: backendRequest timeout cannot be longer than request timeout
                rule: "!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && duration(self.backendRequest) > duration(self.request))"
          x-kubernetes-validations:
          - message: RequestRedirect filter must not be used together with backendRefs
            rule: "(has(self.backendRefs) && size(self.backendRefs) > 0) ? (!has(self.filters) || self.filters.all(f, !has(f.requestRedirect))) : true"
        x-kubernetes-validations:
        - message: While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128
          rule: "(self.size() > 0 ? (has(self[0].matches) ? self[0].matches.size() : 0) : 0) + (self.size() > 1 ? (has(self[1].matches) ? self[1].matches.size() : 0) : 0) + (self.size() > 2 ? (has(self[2].matches) ? self[2].matches.size() : 0) : 0) + (self.size() > 3 ? (has(self[3].matches) ? self[3].matches.size() : 0) : 0) <= 128"
        - message: Rule name must be unique within the route
          rule: "self.all(l1, !has(l1.name) || self.exists_one(l2, has(l2.name) && l1.name == l2.name))"
`

// validRoute is a route that passes every rule, with defaults applied.
const validRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: web}
spec:
  hostnames: [shop.example.com]
  parentRefs:
  - {group: gateway.networking.k8s.io, kind: Gateway, name: public, namespace: infra, sectionName: https}
  - {group: gateway.networking.k8s.io, kind: Gateway, name: public, namespace: infra, sectionName: http}
  rules:
  - name: api
    matches:
    - path: {type: PathPrefix, value: /api}
      headers: [{name: x-version, value: "2"}]
    backendRefs:
    - {group: "", kind: Service, name: api, port: 8080, weight: 1}
    timeouts: {request: 10s, backendRequest: 2s}
  - name: legacy
    matches:
    - path: {type: Exact, value: /old}
    filters:
    - type: RequestRedirect
      requestRedirect: {hostname: new.example.com, statusCode: 301}
`

func TestHTTPRouteExcerpt(t *testing.T) {
	t.Parallel()
	rules := compileYAML(t, httpRouteSchema)
	if rules.Len() != 15 {
		t.Errorf("Len() = %d, want 15", rules.Len())
	}
	tests := []struct {
		name string
		// edit changes the valid route into the one to validate.
		edit func(route map[string]any)
		want []Violation
	}{
		{
			name: "valid route",
			edit: func(map[string]any) {},
		},
		{
			name: "two references to the same parent, one without sectionName",
			edit: func(r map[string]any) {
				ref := at(r, "spec", "parentRefs", 1).(map[string]any)
				delete(ref, "sectionName")
			},
			want: []Violation{{
				Path: "/spec/parentRefs", Field: "spec.parentRefs", Reason: ReasonInvalid,
				Message: "sectionName or port must be specified when parentRefs includes 2 or more references to the same parent",
			}},
		},
		{
			name: "two references to the same section",
			edit: func(r map[string]any) {
				at(r, "spec", "parentRefs", 1).(map[string]any)["sectionName"] = "https"
			},
			want: []Violation{{
				Path: "/spec/parentRefs", Field: "spec.parentRefs", Reason: ReasonInvalid,
				Message: "sectionName or port must be unique when parentRefs includes 2 or more references to the same parent",
			}},
		},
		{
			name: "relative path",
			edit: func(r map[string]any) {
				at(r, "spec", "rules", 0, "matches", 0, "path").(map[string]any)["value"] = "api//v1"
			},
			want: []Violation{
				{
					Path: "/spec/rules/0/matches/0/path", Field: "spec.rules[0].matches[0].path", Reason: ReasonInvalid,
					Message: "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']",
				},
				{
					Path: "/spec/rules/0/matches/0/path", Field: "spec.rules[0].matches[0].path", Reason: ReasonInvalid,
					Message: "must not contain '//' when type one of ['Exact', 'PathPrefix']",
				},
			},
		},
		{
			name: "redirect beside backends",
			edit: func(r map[string]any) {
				at(r, "spec", "rules", 0).(map[string]any)["filters"] = []any{
					map[string]any{"type": "RequestRedirect", "requestRedirect": map[string]any{"scheme": "https", "statusCode": 302}},
				}
			},
			want: []Violation{{
				Path: "/spec/rules/0", Field: "spec.rules[0]", Reason: ReasonInvalid,
				Message: "RequestRedirect filter must not be used together with backendRefs",
			}},
		},
		{
			name: "redirect filter without its settings, twice",
			edit: func(r map[string]any) {
				at(r, "spec", "rules", 1).(map[string]any)["filters"] = []any{
					map[string]any{"type": "RequestRedirect"},
					map[string]any{"type": "RequestRedirect", "requestRedirect": map[string]any{"statusCode": 302}},
				}
			},
			want: []Violation{
				{
					Path: "/spec/rules/1/filters", Field: "spec.rules[1].filters", Reason: ReasonInvalid,
					Message: "RequestRedirect filter cannot be repeated",
				},
				{
					Path: "/spec/rules/1/filters/0", Field: "spec.rules[1].filters[0]", Reason: ReasonInvalid,
					Message: "filter.requestRedirect must be specified for RequestRedirect filter.type",
				},
			},
		},
		{
			name: "backend timeout longer than the request's",
			edit: func(r map[string]any) {
				at(r, "spec", "rules", 0, "timeouts").(map[string]any)["backendRequest"] = "1m"
			},
			want: []Violation{{
				Path: "/spec/rules/0/timeouts", Field: "spec.rules[0].timeouts", Reason: ReasonInvalid,
				Message: "backendRequest timeout cannot be longer than request timeout",
			}},
		},
		{
			name: "Service backend without a port",
			edit: func(r map[string]any) {
				delete(at(r, "spec", "rules", 0, "backendRefs", 0).(map[string]any), "port")
			},
			want: []Violation{{
				Path: "/spec/rules/0/backendRefs/0", Field: "spec.rules[0].backendRefs[0]", Reason: ReasonInvalid,
				Message: "Must have port for Service reference",
			}},
		},
		{
			name: "duplicate rule names",
			edit: func(r map[string]any) {
				at(r, "spec", "rules", 1).(map[string]any)["name"] = "api"
			},
			want: []Violation{{
				Path: "/spec/rules", Field: "spec.rules", Reason: ReasonInvalid,
				Message: "Rule name must be unique within the route",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			route := fromYAML(t, validRoute).(map[string]any)
			tt.edit(route)
			got := rules.Validate(context.Background(), route, nil)
			for i := range got {
				if got[i].Rule == "" {
					t.Errorf("violation %d names no rule: %#v", i, got[i])
				}
				got[i].Rule = "" // long; the message identifies the rule
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Validate:\n got %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// at returns the value at a path of keys and indexes within v.
func at(v any, path ...any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			v = v.(map[string]any)[s]
		case int:
			v = v.([]any)[s]
		}
	}
	return v
}
