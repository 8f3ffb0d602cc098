// Package celrules evaluates the CEL validation rules (x-kubernetes-validations)
// of an OpenAPI v3 schema as the Kubernetes API server evaluates those of a
// CustomResourceDefinition.
//
// The compilation, the type of self at each schema node, the function
// libraries, the cost estimates and the conversion of values come from the
// Kubernetes libraries themselves, so that a rule accepted or refused here
// is accepted or refused by a cluster, and evaluates to the same result.
// Compile applies the checks Kubernetes makes when a CRD is written
// (syntax, types, placement of transition rules, static cost limits);
// Validate applies those it makes when a resource is written (the per-call
// cost limit, the runtime budget per object, transition rules only on
// update, ratcheting of unchanged values).
//
// The schema's root may be a whole resource (a CRD's openAPIV3Schema, whose
// properties are apiVersion, kind, metadata, spec...) or any object within
// one, such as the schema of a resource's spec. A root that declares
// apiVersion, kind and metadata is taken to be the root of a resource:
// there, as in Kubernetes, self.metadata exposes name and generateName.
//
// Defaults are not applied here: the caller applies them before
// validating, as the API server does.
package celrules

import (
	"fmt"
	"strings"
)

// Reasons a Violation gives, the machine-readable error types of the
// Kubernetes API server.
const (
	// ReasonInvalid is the reason of a failed rule without one of its own,
	// and of a rule that could not be evaluated.
	ReasonInvalid = "FieldValueInvalid"
	// ReasonRequired is given by rules that say reason: FieldValueRequired.
	ReasonRequired = "FieldValueRequired"
	// ReasonForbidden is given by rules that say reason: FieldValueForbidden.
	ReasonForbidden = "FieldValueForbidden"
	// ReasonDuplicate is given by rules that say reason: FieldValueDuplicate.
	ReasonDuplicate = "FieldValueDuplicate"
	// ReasonInternal is given when validation itself failed, for instance
	// when its context was canceled.
	ReasonInternal = "InternalError"
)

// Rules is the compiled form of every rule in one schema. A nil *Rules
// validates nothing. It is safe for concurrent use.
type Rules struct {
	root  *node
	count int
	// resourceRoot tells whether the schema's root is a whole resource,
	// which changes how self is typed there and what ratchets.
	resourceRoot bool
}

// Len returns how many rules the schema holds.
func (r *Rules) Len() int {
	if r == nil {
		return 0
	}
	return r.count
}

// Violation is one rule that an object breaks, or one that could not be
// evaluated on it.
type Violation struct {
	// Path is the RFC 6901 JSON pointer, within the validated object, of the
	// field the violation is reported on: the value the rule is attached
	// to, or the field its fieldPath names. Empty for the object's root.
	Path string
	// Field is the same place written as Kubernetes writes field paths
	// (spec.replicas, spec.ports[0], spec.labels[app]), relative to the
	// validated object. Empty for the object's root.
	Field string
	// Message is the rule's message, the result of its messageExpression,
	// or Kubernetes' default "failed rule: <rule>"; for a rule that could
	// not be evaluated, why.
	Message string
	// Reason is one of the Reason constants.
	Reason string
	// Rule is the CEL expression concerned; empty when the violation is
	// not about one rule (the cost budget was spent before reaching a node).
	Rule string
}

// String formats the violation as Kubernetes formats a field error:
// "spec.replicas: message".
func (v Violation) String() string {
	if v.Field == "" {
		return v.Message
	}
	return v.Field + ": " + v.Message
}

// Problem is one thing that keeps a schema's rules from compiling.
type Problem struct {
	// Pointer is the RFC 6901 JSON pointer of the offending place within
	// the schema, e.g. /properties/spec/x-kubernetes-validations/0/rule.
	Pointer string
	// Message says what is wrong.
	Message string
}

// String formats the problem as "pointer: message", naming the empty
// pointer of the schema's root "(root)".
func (p Problem) String() string {
	if p.Pointer == "" {
		return "(root): " + p.Message
	}
	return p.Pointer + ": " + p.Message
}

// CompileError is the error Compile returns for a schema whose rules cannot
// be used; it lists every problem found.
type CompileError struct {
	// Problems holds at least one problem.
	Problems []Problem
}

// Error joins the problems on one line each.
func (e *CompileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "x-kubernetes-validations: %d problem", len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(strings.ReplaceAll(p.String(), "\n", "\n    "))
	}
	return b.String()
}
