package celrules

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	celgo "github.com/google/cel-go/cel"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Kubernetes' static cost limits for the rules of a CRD. They are constants
// of its CRD validation package, which is not imported because it brings in
// most of an API server (twice the size of what is used here).
const (
	// staticCostLimit is the largest estimated cost of one expression,
	// counting every place its node can repeat (StaticEstimatedCostLimit).
	staticCostLimit = 10_000_000
	// staticTotalCostLimit is the largest estimated cost of all of a
	// schema's expressions together (StaticEstimatedCRDCostLimit).
	staticTotalCostLimit = 100_000_000
)

// node holds the compiled rules of one schema node and the nodes below it
// that hold rules. It parallels the structural schema, as Kubernetes'
// validator does.
type node struct {
	schema *structuralschema.Structural
	// resourceRoot is true for the root of a resource: the schema's root
	// when it is a whole resource, or an x-kubernetes-embedded-resource.
	resourceRoot bool
	rules        []rule
	usesOldSelf  bool
	properties   map[string]*node
	items        *node
	additional   *node
}

// rule is one compiled rule.
type rule struct {
	spec    apiextensionsv1.ValidationRule
	program celgo.Program
	// message is the compiled messageExpression, nil without one.
	message     celgo.Program
	usesOldSelf bool
	// fieldPath is the rule's fieldPath as JSON pointer tokens below its
	// node, and fieldPathText as Kubernetes normalizes it; both empty
	// without a fieldPath.
	fieldPath     []string
	fieldPathText string
}

// Compile compiles every rule of an OpenAPI v3 schema, given as decoded
// from JSON or YAML, and checks them as Kubernetes checks the rules of a
// CRD being created. On failure the error is a *CompileError listing each
// problem with its JSON pointer in the schema. A schema without rules
// compiles, cheaply, to Rules that validate nothing.
func Compile(schema map[string]any) (*Rules, error) {
	var s scan
	clean := s.schema(schema, "", "")
	if s.rules == 0 {
		return &Rules{}, nil
	}
	for _, ref := range s.refs {
		s.problems = append(s.problems, Problem{ref, "$ref is not supported in a schema with x-kubernetes-validations: Kubernetes schemas are written inline, and rules need the type of every value they read"})
	}
	if len(s.problems) > 0 {
		return nil, &CompileError{Problems: s.problems}
	}
	ss, err := structural(clean)
	if err != nil {
		return nil, &CompileError{Problems: []Problem{{"", err.Error()}}}
	}
	c := compiler{
		// The environment Kubernetes gives new expressions: the libraries
		// of the Kubernetes version these modules are, as a cluster of that
		// version offers them to a CRD being written.
		envSet: environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()),
	}
	resourceRoot := isResourceRoot(ss)
	one := uint64(1)
	root := c.node(ss, model.SchemaDeclType(ss, resourceRoot), "", &one, nil, resourceRoot)
	if c.total > staticTotalCostLimit {
		for _, e := range c.expensive {
			c.problems = append(c.problems, Problem{e.pointer, "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"})
		}
		c.problems = append(c.problems, Problem{"", costMessage("x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema", c.total, staticTotalCostLimit)})
	}
	if len(c.problems) > 0 {
		return nil, &CompileError{Problems: c.problems}
	}
	return &Rules{root: root, count: s.rules, resourceRoot: resourceRoot}, nil
}

// compiler walks a structural schema, compiling its rules.
type compiler struct {
	envSet   *environment.EnvSet
	problems []Problem
	// total and expensive track the estimated cost of all expressions, and
	// the costliest of them, as Kubernetes' TotalCost does.
	total     uint64
	expensive []ruleCost
}

// ruleCost is the estimated cost of one expression.
type ruleCost struct {
	pointer string
	cost    uint64
}

// node compiles the rules of ss, found at ptr, and of the nodes below it;
// it returns nil when there are none. decl is the CEL type of values of
// ss; cardinality is how many times the node can repeat in one object (nil
// when unbounded); uncorrelatable, when not nil, is the place of the
// nearest list or map above whose items cannot be paired with those of the
// old object, below which transition rules are refused.
func (c *compiler) node(ss *structuralschema.Structural, decl *apiservercel.DeclType, ptr string, cardinality *uint64, uncorrelatable *string, resourceRoot bool) *node {
	n := &node{schema: ss, resourceRoot: resourceRoot}
	// Kubernetes refuses other list and map types; CEL could not read
	// their values, so rules would fail on every object instead.
	if t := ss.XListType; t != nil && !slices.Contains([]string{"atomic", "set", "map"}, *t) {
		c.problem(ptr+"/x-kubernetes-list-type", fmt.Sprintf("unsupported value %q: supported values: atomic, set, map", *t))
	} else if t != nil && *t == "map" && len(ss.XListMapKeys) == 0 {
		c.problem(ptr+"/x-kubernetes-list-map-keys", "must not be empty if x-kubernetes-list-type is map")
	}
	if t := ss.XMapType; t != nil && *t != "atomic" && *t != "granular" {
		c.problem(ptr+"/x-kubernetes-map-type", fmt.Sprintf("unsupported value %q: supported values: atomic, granular", *t))
	}
	if len(ss.XValidations) > 0 {
		n.rules = c.rules(ss, decl, ptr, cardinality, uncorrelatable)
		for _, r := range n.rules {
			n.usesOldSelf = n.usesOldSelf || r.usesOldSelf
		}
	}
	childCardinality := multiplyCardinality(cardinality, maxElements(ss))

	for _, name := range sortedKeys(ss.Properties) {
		prop := ss.Properties[name]
		var propDecl *apiservercel.DeclType
		if escaped, ok := apiservercel.Escape(name); ok && decl != nil {
			if f, ok := decl.Fields[escaped]; ok {
				propDecl = f.Type
			}
		}
		if propDecl == nil {
			// Names CEL cannot spell, and properties of values CEL cannot
			// type, are typed on their own, as Kubernetes does.
			propDecl = model.SchemaDeclType(&prop, prop.XEmbeddedResource)
		}
		sub := uncorrelatable
		if sub == nil && !cel.MapIsCorrelatable(ss.XMapType) {
			sub = &ptr
		}
		if child := c.node(&prop, propDecl, ptr+"/properties/"+escapePointer(name), childCardinality, sub, prop.XEmbeddedResource); child != nil {
			if n.properties == nil {
				n.properties = make(map[string]*node)
			}
			n.properties[name] = child
		}
	}
	if ss.AdditionalProperties != nil && ss.AdditionalProperties.Structural != nil {
		values := ss.AdditionalProperties.Structural
		n.additional = c.node(values, elemType(decl, values), ptr+"/additionalProperties", childCardinality, uncorrelatable, values.XEmbeddedResource)
	}
	if ss.Items != nil {
		// Only the items of map-type lists can be paired with old items;
		// an unset list type is atomic.
		sub := uncorrelatable
		if sub == nil && (ss.XListType == nil || *ss.XListType != "map") {
			sub = &ptr
		}
		n.items = c.node(ss.Items, elemType(decl, ss.Items), ptr+"/items", childCardinality, sub, ss.Items.XEmbeddedResource)
	}
	if len(n.rules) == 0 && n.properties == nil && n.additional == nil && n.items == nil {
		return nil
	}
	return n
}

// elemType returns the CEL type of the items or values of a list or map
// typed decl, whose items or values have the schema ss.
func elemType(decl *apiservercel.DeclType, ss *structuralschema.Structural) *apiservercel.DeclType {
	if decl != nil && decl.ElemType != nil {
		return decl.ElemType
	}
	return model.SchemaDeclType(ss, ss.XEmbeddedResource)
}

// supportedReasons are the reasons a rule may give.
var supportedReasons = []string{ReasonDuplicate, ReasonForbidden, ReasonInvalid, ReasonRequired}

// lineBreak matches what Kubernetes counts as a line break in messages,
// rules and field paths.
var lineBreak = regexp.MustCompile(`[\n\r]+`)

// rules checks and compiles the rules of one node, as Kubernetes does for
// a CRD being created.
func (c *compiler) rules(ss *structuralschema.Structural, decl *apiservercel.DeclType, ptr string, cardinality *uint64, uncorrelatable *string) []rule {
	base := ptr + "/" + rulesKey
	before := len(c.problems)
	for i, r := range ss.XValidations {
		at := base + "/" + strconv.Itoa(i)
		rule := strings.TrimSpace(r.Rule)
		msg := strings.TrimSpace(r.Message)
		switch {
		case rule == "":
			c.problem(at+"/rule", "rule is not specified")
		case r.Message != "" && msg == "":
			c.problem(at+"/message", "must be non-empty if specified")
		case lineBreak.MatchString(msg):
			c.problem(at+"/message", "must not contain line breaks")
		case lineBreak.MatchString(rule) && msg == "":
			c.problem(at+"/message", "message must be specified if rule contains line breaks")
		}
		if r.MessageExpression != "" && strings.TrimSpace(r.MessageExpression) == "" {
			c.problem(at+"/messageExpression", "messageExpression must be non-empty if specified")
		}
		if r.Reason != nil && !slices.Contains(supportedReasons, string(*r.Reason)) {
			c.problem(at+"/reason", fmt.Sprintf("unsupported value %q: supported values: %s", *r.Reason, strings.Join(supportedReasons, ", ")))
		}
		if r.FieldPath != "" {
			switch {
			case strings.TrimSpace(r.FieldPath) == "":
				c.problem(at+"/fieldPath", "must be non-empty if specified")
			case lineBreak.MatchString(r.FieldPath):
				c.problem(at+"/fieldPath", "must not contain line breaks")
			default:
				if _, _, err := cel.ValidFieldPath(r.FieldPath, ss); err != nil {
					c.problem(at+"/fieldPath", "must be a valid path: "+err.Error())
				}
			}
		}
	}
	if len(c.problems) > before {
		// As in Kubernetes, rules are compiled only once they are well formed.
		return nil
	}
	if decl == nil {
		c.problem(base, "the schema here has no type CEL can give to self: it needs a type, x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields")
		return nil
	}
	results, err := cel.Compile(ss, decl, celconfig.PerCallLimit, c.envSet, cel.NewExpressionsEnvLoader())
	if err != nil {
		c.problem(base, err.Error())
		return nil
	}
	compiled := make([]rule, 0, len(results))
	for i, cr := range results {
		at := base + "/" + strconv.Itoa(i)
		spec := ss.XValidations[i]
		cost := expressionCost(cr, cardinality)
		if cost > staticCostLimit {
			c.problem(at+"/rule", costMessage("estimated rule cost", cost, staticCostLimit))
		}
		c.observe(at+"/rule", cost)
		if cr.Error != nil {
			c.problem(at+"/rule", cr.Error.Detail)
		}
		if cr.MessageExpressionError != nil {
			c.problem(at+"/messageExpression", cr.MessageExpressionError.Detail)
		} else if cr.MessageExpression != nil {
			// Kubernetes counts a message expression once, whatever the
			// cardinality of its node: it only runs when its rule fails.
			if cr.MessageExpressionMaxCost > staticCostLimit {
				c.problem(at+"/messageExpression", costMessage("estimated messageExpression cost", cr.MessageExpressionMaxCost, staticCostLimit))
			}
			c.observe(at+"/messageExpression", cr.MessageExpressionMaxCost)
		}
		if cr.UsesOldSelf {
			if uncorrelatable != nil {
				c.problem(at+"/rule", "oldSelf cannot be used on the uncorrelatable portion of the schema within "+describePointer(*uncorrelatable)+
					": the items of a list are paired with those of the old object only in lists with x-kubernetes-list-type: map")
			}
		} else if spec.OptionalOldSelf != nil {
			c.problem(at+"/optionalOldSelf", "may not be set if oldSelf is not used in rule")
		}
		if cr.Program == nil {
			continue
		}
		r := rule{spec: spec, program: cr.Program, message: cr.MessageExpression, usesOldSelf: cr.UsesOldSelf}
		if cr.NormalizedRuleFieldPath != "" {
			r.fieldPath = fieldPathTokens(spec.FieldPath)
			r.fieldPathText = cr.NormalizedRuleFieldPath
		}
		compiled = append(compiled, r)
	}
	return compiled
}

// problem records one problem.
func (c *compiler) problem(ptr, msg string) {
	c.problems = append(c.problems, Problem{ptr, msg})
}

// observe adds the cost of one expression to the total, keeping the four
// costliest that weigh at least 1% of the limit, as Kubernetes does to name
// them when the total is too high.
func (c *compiler) observe(ptr string, cost uint64) {
	if math.MaxUint64-c.total < cost {
		c.total = math.MaxUint64
	} else {
		c.total += cost
	}
	if cost < staticTotalCostLimit/100 {
		return
	}
	c.expensive = append(c.expensive, ruleCost{ptr, cost})
	sort.SliceStable(c.expensive, func(i, j int) bool { return c.expensive[i].cost > c.expensive[j].cost })
	if len(c.expensive) > 4 {
		c.expensive = c.expensive[:4]
	}
}

// expressionCost is the estimated cost of a rule counting every place its
// node can repeat: the bound given by maxItems and maxProperties above it,
// or, without one, the most copies of its value a request could hold.
func expressionCost(cr cel.CompilationResult, cardinality *uint64) uint64 {
	if cardinality != nil {
		return multiply(cr.MaxCost, *cardinality)
	}
	return multiply(cr.MaxCost, cr.MaxCardinality)
}

// maxElements returns how many times the children of a node can occur per
// occurrence of the node: maxItems or maxProperties for lists and maps (nil
// when unbounded), one for objects and scalars.
func maxElements(ss *structuralschema.Structural) *uint64 {
	one := uint64(1)
	var limit *int64
	switch ss.Type {
	case "object":
		if ss.AdditionalProperties == nil {
			return &one
		}
		if ss.ValueValidation != nil {
			limit = ss.ValueValidation.MaxProperties
		}
	case "array":
		if ss.ValueValidation != nil {
			limit = ss.ValueValidation.MaxItems
		}
	default:
		return &one
	}
	if limit == nil {
		return nil
	}
	n := uint64(max(*limit, 0))
	return &n
}

// multiplyCardinality multiplies two cardinalities, either unbounded.
func multiplyCardinality(a, b *uint64) *uint64 {
	if a == nil || b == nil {
		return nil
	}
	n := multiply(*a, *b)
	return &n
}

// multiply returns a*b, or the largest uint64 when that overflows.
func multiply(a, b uint64) uint64 {
	if a == 0 {
		return 0
	}
	if math.MaxUint64/a < b {
		return math.MaxUint64
	}
	return a * b
}

// costMessage says by how much an estimated cost exceeds its limit, in
// Kubernetes' words.
func costMessage(what string, cost, limit uint64) string {
	factor := float64(cost) / float64(limit)
	var s string
	switch {
	case factor > 100:
		// Two orders of magnitude over: the rule is likely quadratic or
		// worse, and the figure says nothing more.
		s = "more than 100x"
	case factor < 1.5:
		s = fmt.Sprintf("%fx", factor)
	default:
		s = fmt.Sprintf("%.1fx", factor)
	}
	return fmt.Sprintf("%s exceeds budget by factor of %s (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)", what, s)
}

// describePointer names a place in the schema for a message.
func describePointer(ptr string) string {
	if ptr == "" {
		return "the root"
	}
	return ptr
}
