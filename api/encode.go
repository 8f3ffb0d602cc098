package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	gosync "sync"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
)

// Resources are encoded by hand: they are what the API serves most, in
// lists of hundreds, and encoding/json spends most of its time there on
// reflection and on validating and compacting the raw spec and outputs
// again. The output is byte for byte what json.Encoder makes of
// NewResource's value (a test holds it to that), so clients see no
// difference.

// appendResource appends r as NewResource(r) encodes.
func appendResource(b []byte, r *store.Resource) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, r.Name)
	b = append(b, `,"namespace":`...)
	b = appendJSONString(b, r.Namespace)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, r.Kind)
	b = append(b, `,"resource_type_name":`...)
	b = appendJSONString(b, r.Kind)
	b = append(b, `,"resource_type_version":`...)
	b = appendJSONString(b, r.Version)
	b = append(b, `,"api_version":`...)
	b = appendJSONString(b, r.APIVersion())
	b = append(b, `,"action_plugin":`...)
	b = appendJSONString(b, r.Action)
	b = append(b, `,"spec":`...)
	b = appendRaw(b, r.Spec, "{}")
	b = append(b, `,"spec_hash":`...)
	b = appendJSONString(b, r.SpecHash)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(r.Phase))
	b = append(b, `,"status_message":`...)
	b = appendJSONString(b, r.StatusMessage)
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, r.Generation, 10)
	b = append(b, `,"observed_generation":`...)
	b = strconv.AppendInt(b, r.ObservedGeneration, 10)
	b = append(b, `,"conditions":[`...)
	for i := range r.Conditions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCondition(b, &r.Conditions[i])
	}
	b = append(b, `],"outputs":`...)
	b = appendRaw(b, r.Outputs, "null")
	b = append(b, `,"source":{"name":`...)
	b = appendJSONString(b, r.Source.Name)
	if r.Source.Path != "" {
		b = append(b, `,"path":`...)
		b = appendJSONString(b, r.Source.Path)
	}
	if r.Source.Revision != "" {
		b = append(b, `,"revision":`...)
		b = appendJSONString(b, string(r.Source.Revision))
	}
	b = append(b, `},"labels":`...)
	b = appendStringMap(b, r.Labels)
	b = append(b, `,"annotations":`...)
	b = appendStringMap(b, r.Annotations)
	b = append(b, `,"depends_on":[`...)
	for i, d := range r.DependsOn {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"kind":`...)
		b = appendJSONString(b, d.Kind)
		if d.Namespace != "" { // omitempty, as manifest.ObjectRef has it
			b = append(b, `,"namespace":`...)
			b = appendJSONString(b, d.Namespace)
		}
		b = append(b, `,"name":`...)
		b = appendJSONString(b, d.Name)
		b = append(b, '}')
	}
	b = append(b, `],"retry_count":`...)
	b = strconv.AppendInt(b, int64(r.RetryCount), 10)
	b = append(b, `,"next_reconcile_time":`...)
	b = appendTimePtr(b, r.NextReconcileAt)
	b = append(b, `,"deletion_requested_at":`...)
	b = appendTimePtr(b, r.DeletionRequestedAt)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, r.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, r.UpdatedAt)
	b = append(b, `,"last_reconcile_time":`...)
	b = appendTimePtr(b, r.LastReconcileTime)
	b = append(b, `,"lease":`...)
	if r.LeaseOwner == "" || r.LeaseExpiresAt == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"holder":`...)
		b = appendJSONString(b, r.LeaseOwner)
		b = append(b, `,"since":`...)
		b = appendTimePtr(b, r.LeasedAt)
		b = append(b, `,"expires_at":`...)
		b = appendTime(b, *r.LeaseExpiresAt)
		b = append(b, '}')
	}
	by := r.SuspendedBy()
	b = append(b, `,"suspended":`...)
	b = strconv.AppendBool(b, by != "")
	b = append(b, `,"suspended_by":`...)
	b = appendJSONString(b, by)
	b = append(b, `,"suspended_at":`...)
	b = appendTimePtr(b, r.SuspendedAt)
	b = append(b, `,"orphaned":`...)
	b = strconv.AppendBool(b, r.Orphaned)
	b = append(b, `,"finalizers":[`...)
	if !r.PruneDisabled() { // as finalizers(r) says, without its slice
		b = appendJSONString(b, FinalizerDestroy)
	}
	b = append(b, `],"plugin_config":`...)
	b = appendRaw(b, r.PluginConfig, "null")
	b = append(b, `,"metadata":`...)
	b = appendStringMap(b, r.Annotations)
	return append(b, '}')
}

func appendCondition(b []byte, c *manifest.Condition) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, c.Type)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, string(c.Status))
	if c.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, c.Reason)
	}
	if c.Message != "" {
		b = append(b, `,"message":`...)
		b = appendJSONString(b, c.Message)
	}
	b = append(b, `,"lastTransitionTime":`...)
	b = appendTime(b, c.LastTransitionTime)
	if c.ObservedGeneration != 0 {
		b = append(b, `,"observedGeneration":`...)
		b = strconv.AppendInt(b, c.ObservedGeneration, 10)
	}
	return append(b, '}')
}

// plainJSON marks the bytes a JSON string holds as they are when
// encoding/json escapes HTML: printable ASCII but for " \ < > &.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// appendJSONString appends s as encoding/json does; strings with anything
// to escape, rare in names and messages, are left to it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSON[s[i]] {
			enc, _ := json.Marshal(s) // a string always encodes
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendStringMap(b []byte, m map[string]string) []byte {
	if len(m) == 0 {
		return append(b, "{}"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

func appendTimePtr(b []byte, t *time.Time) []byte {
	if t == nil {
		return append(b, "null"...)
	}
	return appendTime(b, *t)
}

// appendTime appends t as time.Time's MarshalJSON does; years it refuses
// (outside 0-9999, never stored) are left to it, as encoding/json would.
func appendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		enc, err := t.MarshalJSON()
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, enc...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendRaw appends a raw JSON document as encoding/json does a
// json.RawMessage: compacted, with HTML characters escaped; empty is
// whenEmpty.
func appendRaw(b []byte, raw []byte, whenEmpty string) []byte {
	if len(raw) == 0 {
		return append(b, whenEmpty...)
	}
	buf := bytes.NewBuffer(b)
	start := len(b)
	if err := json.Compact(buf, raw); err != nil {
		// Stored documents are valid JSON; if one is not, say null
		// rather than break the whole answer.
		return append(b[:start], "null"...)
	}
	b = buf.Bytes()
	if bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, b[start:])
		b = append(b[:start], esc.Bytes()...)
	}
	return b
}

// responseBufs recycles the buffers of encoded answers; big ones (a list
// of resources with large specs) are left to the collector.
var responseBufs = gosync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const maxPooledBuf = 1 << 20

// writeResources answers rows as a JSON array of Resource, as writeJSON
// would.
func writeResources(w http.ResponseWriter, status int, rows []*store.Resource) {
	bp := responseBufs.Get().(*[]byte)
	b := append((*bp)[:0], '[')
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendResource(b, r)
	}
	b = append(b, "]\n"...)
	writeEncoded(w, status, b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		responseBufs.Put(bp)
	}
}

// writeResource answers one resource as writeJSON(NewResource(r)) would.
func writeResource(w http.ResponseWriter, status int, r *store.Resource) {
	bp := responseBufs.Get().(*[]byte)
	b := append(appendResource((*bp)[:0], r), '\n')
	writeEncoded(w, status, b)
	if cap(b) <= maxPooledBuf {
		*bp = b
		responseBufs.Put(bp)
	}
}

func writeEncoded(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// appendPage appends rows of the read model as a JSON array, as
// writeResources encodes them.
func appendPage(b []byte, rows []*modelResource) ([]byte, error) {
	b = append(b, '[')
	var err error
	for i, r := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = r.appendJSON(b); err != nil {
			return b, err
		}
	}
	return append(b, "]\n"...), nil
}

var newline = []byte("\n")

// writeEncodedResource answers one resource of the read model, as
// writeResource would.
func writeEncodedResource(w http.ResponseWriter, status int, r *modelResource) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(r.size()+1))
	w.WriteHeader(status)
	if err := r.writeTo(w); err == nil {
		_, _ = w.Write(newline)
	}
}
