package celrules

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
)

// The walk below follows Kubernetes' CRD validator
// (k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel.Validator) step
// by step: which values are visited, which old value each is paired with,
// when transition rules run, how cost is counted and what each failure
// says. It is written out rather than called because that validator
// reports field errors alone, without the rule each comes from, and with
// paths flattened to strings that cannot be turned back into JSON pointers
// reliably.

// Validate evaluates the rules against obj, the value the schema's root
// describes, and returns what obj breaks; none when it passes. oldObj is
// the object's previous value on an update, nil on a create: as in
// Kubernetes, transition rules (those reading oldSelf) run only where an
// old value exists at their node, unless they set optionalOldSelf; and on
// an update a rule that fails on a value left unchanged is not reported
// (ratcheting), so that objects stored before a rule existed stay
// editable. Numbers may be float64, json.Number or any integer type; objects
// are map[string]any and lists []any. obj and oldObj are not modified.
func (r *Rules) Validate(ctx context.Context, obj, oldObj any) []Violation {
	if r == nil || r.root == nil {
		return nil
	}
	obj = normalize(obj)
	oldObj = normalize(oldObj)
	w := walk{budget: celconfig.RuntimeCELCostBudget}
	var correlation ratchet
	if oldObj != nil {
		correlation.current = common.NewCorrelatedObject(obj, oldObj, &model.Structural{Structural: r.root.schema})
		correlation.atResourceRoot = r.resourceRoot
	}
	w.node(ctx, r.root, nil, "", obj, oldObj, correlation)
	return w.violations
}

// walk is one validation of one object.
type walk struct {
	// budget is the cost left for this object; negative once spent, after
	// which nothing more is evaluated.
	budget     int64
	violations []Violation
}

// node validates obj, found at fld and ptr, against n and the nodes below.
func (w *walk) node(ctx context.Context, n *node, fld *field.Path, ptr string, obj, oldObj any, correlation ratchet) {
	if n == nil || obj == nil || w.budget < 0 {
		return
	}
	w.expressions(ctx, n, fld, ptr, obj, oldObj, correlation)
	if w.budget < 0 {
		return
	}
	switch obj := obj.(type) {
	case map[string]any:
		oldMap, _ := oldObj.(map[string]any)
		w.object(ctx, n, fld, ptr, obj, oldMap, correlation)
	case []any:
		oldList, _ := oldObj.([]any)
		w.list(ctx, n, fld, ptr, obj, oldList, correlation)
	}
}

// object visits the values of an object or map. Kubernetes visits them in
// the map's order, which is random; they are sorted here so that the same
// object always gives the same violations, even when the budget runs out.
func (w *walk) object(ctx context.Context, n *node, fld *field.Path, ptr string, obj, oldObj map[string]any, correlation ratchet) {
	correlatable := cel.MapIsCorrelatable(n.schema.XMapType)
	keys := sortedKeys(obj)
	old := func(k string) any {
		if correlatable {
			return oldObj[k]
		}
		return nil
	}
	if n.additional != nil {
		for _, k := range keys {
			w.node(ctx, n.additional, fld.Key(k), ptr+"/"+escapePointer(k), obj[k], old(k), correlation.key(k))
			if w.budget < 0 {
				return
			}
		}
	}
	if n.properties != nil {
		for _, k := range keys {
			if sub, ok := n.properties[k]; ok {
				w.node(ctx, sub, fld.Child(k), ptr+"/"+escapePointer(k), obj[k], old(k), correlation.key(k))
				if w.budget < 0 {
					return
				}
			}
		}
	}
}

// list visits the items of a list. Only in map-type lists is an item paired
// with an old one, the one with the same keys.
func (w *walk) list(ctx context.Context, n *node, fld *field.Path, ptr string, obj, oldObj []any, correlation ratchet) {
	if n.items == nil {
		return
	}
	oldItems := common.MakeMapList(&model.Structural{Structural: n.schema}, oldObj)
	for i, item := range obj {
		w.node(ctx, n.items, fld.Index(i), ptr+"/"+strconv.Itoa(i), item, oldItems.Get(item), correlation.index(i))
		if w.budget < 0 {
			return
		}
	}
}

// budgetSpent is Kubernetes' message once the budget of an object is spent.
const budgetSpent = "validation failed due to running out of cost budget, no further validation rules will be run"

// expressions evaluates the rules of one node.
func (w *walk) expressions(ctx context.Context, n *node, fld *field.Path, ptr string, obj, oldObj any, correlation ratchet) {
	if len(n.rules) == 0 {
		return
	}
	if err := ctx.Err(); err != nil {
		w.add(fld, ptr, ReasonInternal, "validation stopped: "+err.Error(), "")
		w.budget = -1
		return
	}
	if w.budget <= 0 {
		w.add(fld, ptr, ReasonInvalid, budgetSpent, "")
		w.budget = -1
		return
	}
	sts := n.schema
	if n.resourceRoot {
		sts = model.WithTypeAndObjectMeta(sts)
	}
	activation, optionalActivation := activations(sts, obj, oldObj, n.usesOldSelf)
	for _, r := range n.rules {
		optionalOldSelf := r.spec.OptionalOldSelf != nil && *r.spec.OptionalOldSelf
		if r.usesOldSelf && oldObj == nil && !optionalOldSelf {
			// A transition rule needs an old value to compare with.
			continue
		}
		ruleActivation := activation
		if optionalOldSelf {
			ruleActivation = optionalActivation
		}
		result, details, err := r.program.ContextEval(ctx, ruleActivation)
		if details == nil || details.ActualCost() == nil {
			reason := ReasonInvalid
			if details == nil {
				reason = ReasonInternal
			}
			w.add(fld, ptr, reason, "runtime cost could not be calculated for validation rule: "+ruleErrorString(r.spec)+", no further validation rules will be run", r.spec.Rule)
			w.budget = -1
			return
		}
		cost := details.ActualCost()
		if *cost > math.MaxInt64 || int64(*cost) > w.budget {
			w.add(fld, ptr, ReasonInvalid, budgetSpent, r.spec.Rule)
			w.budget = -1
			return
		}
		w.budget -= int64(*cost)
		if err != nil {
			switch msg := err.Error(); {
			case strings.HasPrefix(msg, "no such overload"):
				// Types are checked at compile time, except where a value is
				// dynamic (int-or-string): say what went wrong.
				w.add(fld, ptr, ReasonInvalid, fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", msg, ruleErrorString(r.spec)), r.spec.Rule)
			case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
				w.add(fld, ptr, ReasonInvalid, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", msg, ruleErrorString(r.spec)), r.spec.Rule)
				w.budget = -1
				return
			default:
				// no such key, index out of bounds, division by zero...
				w.add(fld, ptr, ReasonInvalid, fmt.Sprintf("%v evaluating rule: %v", msg, ruleErrorString(r.spec)), r.spec.Rule)
			}
			continue
		}
		if result == types.True {
			continue
		}

		at, atPtr := fld, ptr
		if r.fieldPathText != "" {
			at = at.Child(r.fieldPathText)
			for _, t := range r.fieldPath {
				atPtr += "/" + escapePointer(t)
			}
		}
		// Transition rules are never ratcheted: comparing with the old
		// value is their purpose.
		ratcheted := !r.usesOldSelf && correlation.unchanged()
		message, ok := "", false
		if r.message != nil {
			// Kubernetes evaluates the message with the activation of rules
			// whose oldSelf is not optional, whatever the rule's own.
			m, failure := w.message(ctx, r, activation)
			switch {
			case failure == nil:
				message, ok = m, true
			case failure.stop:
				if !ratcheted {
					w.add(at, atPtr, failure.reason, failure.message, r.spec.Rule)
				}
				w.budget = -1
				return
			}
		}
		if !ok {
			message = ruleMessageOrDefault(r.spec)
		}
		if !ratcheted {
			w.add(at, atPtr, reason(r.spec), message, r.spec.Rule)
		}
	}
}

// messageFailure is why a messageExpression gave no message. Only failures
// that stop validation are reported; otherwise the rule's message is used.
type messageFailure struct {
	stop    bool
	reason  string
	message string
}

// message evaluates the messageExpression of a failed rule, charging its
// cost to the budget.
func (w *walk) message(ctx context.Context, r rule, activation interpreter.Activation) (string, *messageFailure) {
	result, details, err := r.message.ContextEval(ctx, activation)
	if details == nil || details.ActualCost() == nil {
		return "", &messageFailure{true, ReasonInternal, fmt.Sprintf("runtime cost could not be calculated for messageExpression: %q", r.spec.MessageExpression)}
	}
	cost := details.ActualCost()
	if *cost > math.MaxInt64 || int64(*cost) > w.budget {
		return "", &messageFailure{true, ReasonInvalid, "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"}
	}
	if err != nil && strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
		return "", &messageFailure{true, ReasonInvalid, fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", r.spec.MessageExpression)}
	}
	w.budget -= int64(*cost)
	if err != nil {
		return "", &messageFailure{}
	}
	s, ok := result.Value().(string)
	if !ok {
		return "", &messageFailure{}
	}
	s = strings.TrimSpace(s)
	if s == "" || len(s) > celconfig.MaxEvaluatedMessageExpressionSizeBytes || strings.Contains(s, "\n") {
		return "", &messageFailure{}
	}
	return s, nil
}

// add records a violation.
func (w *walk) add(fld *field.Path, ptr, reason, message, rule string) {
	v := Violation{Path: ptr, Message: message, Reason: reason, Rule: rule}
	if fld != nil {
		v.Field = fld.String()
	}
	w.violations = append(w.violations, v)
}

// reason returns the reason a failed rule is reported with.
func reason(r apiextensionsv1.ValidationRule) string {
	if r.Reason == nil {
		return ReasonInvalid
	}
	switch s := string(*r.Reason); s {
	case ReasonRequired, ReasonForbidden, ReasonDuplicate:
		return s
	default:
		return ReasonInvalid
	}
}

// ruleMessageOrDefault is what a failed rule says without a message
// expression.
func ruleMessageOrDefault(r apiextensionsv1.ValidationRule) string {
	if r.Message == "" {
		return "failed rule: " + ruleErrorString(r)
	}
	return strings.TrimSpace(r.Message)
}

// ruleErrorString names a rule in messages: by its message when it has one.
func ruleErrorString(r apiextensionsv1.ValidationRule) string {
	if r.Message != "" {
		return strings.TrimSpace(r.Message)
	}
	return strings.TrimSpace(r.Rule)
}

// activation resolves self and oldSelf for the rules of one node.
type activation struct {
	self, oldSelf ref.Val
	// hasOldSelf says whether oldSelf is defined at all, not whether it
	// holds a value: for optionalOldSelf rules it may be optional.none().
	hasOldSelf bool
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case cel.ScopedVarName:
		return a.self, true
	case cel.OldScopedVarName:
		return a.oldSelf, a.hasOldSelf
	default:
		return nil, false
	}
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation {
	return nil
}

// activations returns the activation for ordinary rules, and the one for
// rules whose oldSelf is optional.
func activations(sts *structuralschema.Structural, obj, oldObj any, usesOldSelf bool) (plain, optional interpreter.Activation) {
	a := &activation{self: cel.UnstructuredToVal(obj, sts)}
	if !usesOldSelf {
		return a, a
	}
	o := &activation{self: a.self, hasOldSelf: true, oldSelf: types.OptionalNone}
	if oldObj != nil {
		a.oldSelf = cel.UnstructuredToVal(oldObj, sts)
		a.hasOldSelf = true
		o.oldSelf = types.OptionalOf(a.oldSelf)
	}
	return a, o
}

// ratchet pairs the value being validated with its old value, to tell
// whether it changed. It follows Kubernetes' ratchetingOptions.
type ratchet struct {
	// current pairs the value with its old value; nil where no old value
	// can be paired with it.
	current *common.CorrelatedObject
	// parent is the nearest pairable value above, whose equality decides
	// for values below it that cannot be paired themselves.
	parent *common.CorrelatedObject
	// atResourceRoot is set at the root of a whole resource, whose
	// apiVersion and kind never ratchet: they are not compared there.
	atResourceRoot bool
}

// key steps into the value of an object's field or a map's key.
func (r ratchet) key(name string) ratchet {
	if r.current == nil {
		return r
	}
	if r.atResourceRoot && (name == "apiVersion" || name == "kind") {
		return ratchet{}
	}
	return ratchet{current: r.current.Key(name), parent: r.current}
}

// index steps into an item of a list.
func (r ratchet) index(i int) ratchet {
	if r.current == nil {
		return r
	}
	return ratchet{current: r.current.Index(i), parent: r.current}
}

// unchanged tells whether failures at this value are ratcheted: the value,
// or the nearest pairable value above it, equals its old value.
func (r ratchet) unchanged() bool {
	if r.current != nil {
		return r.current.CachedDeepEqual()
	}
	return r.parent.CachedDeepEqual()
}
