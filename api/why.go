package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/no8s/no8s-agent/manifest"
	"github.com/no8s/no8s-agent/store"
	"github.com/no8s/no8s-agent/why"
)

// Explanations of what is not ready are computed from the read model at
// each read: they depend on other rows (a dependency, the source, the
// agent holding a lease) and on the time, which a resource's own JSON,
// kept as it was read, does not follow.

// runAgents reads the agents again every store.AgentBeat until ctx is
// done, so that explanations say whether a lease's holder is alive; a
// failed read keeps the agents known.
func (m *readModel) runAgents(ctx context.Context) {
	tick := time.NewTicker(store.AgentBeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		actx, cancel := context.WithTimeout(ctx, store.AgentBeat)
		agents, err := m.st.ListAgents(actx)
		cancel()
		if err != nil {
			continue
		}
		byID := agentsByID(agents)
		m.mu.Lock()
		m.agents = byID
		m.mu.Unlock()
	}
}

func agentsByID(agents []*store.Agent) map[string]*store.Agent {
	out := make(map[string]*store.Agent, len(agents))
	for _, a := range agents {
		out[a.ID] = a
	}
	return out
}

// modelWorld is the read model as package why looks things up in it; the
// caller holds the model's read lock.
type modelWorld struct{ m *readModel }

func (w modelWorld) Resource(ref manifest.ObjectRef) *why.Resource {
	e := w.m.byRefLocked(ref)
	switch {
	case e == nil:
		return nil
	case e.facts != nil:
		return e.facts
	}
	return &why.Resource{ID: e.id, Ref: ref, Source: e.source, Phase: e.phase, Ready: true}
}

func (w modelWorld) Source(name string) *store.Source {
	s, _ := w.m.sourceLocked(name)
	return s
}

func (w modelWorld) Agent(id string) *store.Agent { return w.m.agents[id] }

// whyLocked explains e, as far as ctx's token may read what it names; nil
// when e is ready. The caller holds the model's read lock.
func (m *readModel) whyLocked(ctx context.Context, e *modelResource, now time.Time) *why.Why {
	if e.facts == nil {
		return nil
	}
	w := why.ForResource(e.facts, modelWorld{m}, now)
	t := requestToken(ctx)
	if w == nil || t == nil {
		return w
	}
	if w.Source != nil && !t.allows(VerbGet, "", w.Source.Name) {
		// The source's message names what its sync refused, in every
		// namespace and of every kind: it is told to those who may read
		// the source (GET /sources/{name}), as are its problems. Its name
		// and phase, which say why the resource waits, are the resource's.
		src := *w.Source
		src.Message = ""
		w.Source = &src
	}
	for i, l := range w.Chain {
		var src string
		if l.ID != 0 {
			if d := m.byID[l.ID]; d != nil {
				src = d.source
			}
		}
		// A missing dependency has no source: it is named to a token that
		// may read its kind in every source.
		if t.allowsAction(VerbGet, l.Kind, src, l.Namespace, "") {
			continue
		}
		// What the token may not read is not named: not in the chain, nor
		// in the message, nor in the root cause's own explanation.
		names := make([]string, 0, i+1)
		for _, v := range w.Chain[:i] {
			names = append(names, v.Ref().String())
		}
		names = append(names, "a resource this token may not read")
		w.Chain = append(w.Chain[:i:i], why.Link{Message: "a resource this token may not read"})
		w.Cause = nil
		w.Message = "waits on " + strings.Join(names, ", which waits on ")
		break
	}
	return w
}

// resourceWhy is the answer of GET /api/v1/resources/{id}/why.
type resourceWhy struct {
	ID        int64  `json:"id"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Ready is true when there is nothing to explain: the resource is
	// ready and not suspended.
	Ready bool     `json:"ready"`
	Why   *why.Why `json:"why"`
}

// sourceWhy is the answer of GET /api/v1/sources/{name}/why.
type sourceWhy struct {
	Name  string   `json:"name"`
	Ready bool     `json:"ready"`
	Why   *why.Why `json:"why"`
}

// ResourceWhy explains why the resource of that id is not ready, for r's
// caller (what its token may not read is not named), from the read model;
// nil when it is ready. A resource the model does not hold is a 404
// *Error. The dashboard asks it.
func (s *Server) ResourceWhy(r *http.Request, id int64) (*why.Why, error) {
	var out *why.Why
	err := s.viewAt(r, 0, func(m *readModel) error {
		row := m.byID[id]
		if row == nil {
			return errorf(http.StatusNotFound, "resource %d not found", id)
		}
		out = m.whyLocked(r.Context(), row, time.Now())
		return nil
	})
	return out, err
}

func (s *Server) getResourceWhy(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r)
	if err != nil {
		return err
	}
	var out resourceWhy
	var row *modelResource
	err = s.view(r, func(m *readModel) error {
		if row = m.byID[id]; row == nil {
			return errorf(http.StatusNotFound, "resource %d not found", id)
		}
		if err := may(r.Context(), VerbGet, row.kind, row.source, row.namespace); err != nil {
			return err
		}
		out = resourceWhy{ID: row.id, Kind: row.kind, Namespace: row.namespace, Name: row.name,
			Why: m.whyLocked(r.Context(), row, time.Now())}
		out.Ready = out.Why == nil
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSourceWhy(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := maySource(r.Context(), VerbGet, name); err != nil {
		return err
	}
	var out sourceWhy
	err := s.view(r, func(m *readModel) error {
		src, ok := m.sourceLocked(name)
		if !ok {
			return errorf(http.StatusNotFound, "source %q not found", name)
		}
		out = sourceWhy{Name: src.Name, Why: why.ForSource(src)}
		out.Ready = out.Why == nil
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// writeResourceWhy answers one resource of the read model with its
// explanation added as "why", in one Write, as writeEncodedResource
// answers it (whatever masks the answer sees the resource whole).
func writeResourceWhy(w http.ResponseWriter, status int, r *modelResource, expl *why.Why) {
	if expl == nil {
		writeEncodedResource(w, status, r)
		return
	}
	bp := responseBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf {
			responseBufs.Put(bp)
		}
	}()
	b, err := r.appendJSON((*bp)[:0])
	*bp = b
	if err != nil || len(b) == 0 || b[len(b)-1] != '}' {
		writeEncodedResource(w, status, r)
		return
	}
	enc, err := json.Marshal(expl)
	if err != nil {
		writeEncodedResource(w, status, r)
		return
	}
	b = append(append(append(b[:len(b)-1], `,"why":`...), enc...), "}\n"...)
	*bp = b
	writeEncoded(w, status, b)
}
