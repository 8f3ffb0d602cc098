package api

import (
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"io"
	"slices"
	gosync "sync"
	"time"
)

// Resources the read model holds are packed once they have not changed
// for a while: their JSON is compressed against a dictionary per kind,
// the JSON of one resource of that kind, whose keys and most of whose
// values its siblings share. A resource then costs a fraction of its JSON
// (a tenth, or less, for resources of one shape), which is what lets an
// idle agent hold tens of thousands of them in little memory. Unpacking is
// fast (microseconds a resource, streamed into the answer); packing is
// slow, so it is done in the background, and a resource that keeps
// changing (one being reconciled) stays unpacked until it settles.

// Packing settings.
const (
	// packAfter is how long a resource must stay unchanged to be packed;
	// packSettlingAfter, one that is due or being reconciled. Such a one
	// changes again as soon as a worker gets to it (a burst of thousands
	// takes seconds), and packing it before would be work thrown away; it
	// is packed all the same should it wait long, on a dependency say.
	packAfter         = 2 * time.Second
	packSettlingAfter = 30 * time.Second
	// packEvery is how often the packer looks for resources to pack.
	packEvery = time.Second
	// packLevel is the compression level: the fastest of those that use a
	// dictionary.
	packLevel = 2
	// packReleased is how much packing must let go of to say so.
	packReleased = 1 << 20
	// packQuietFor is how long the copy must have taken no burst of
	// changes for packing to go on, and packBusyBudget how much unpacked
	// JSON may wait meanwhile: during a burst, packing would take CPU from
	// the reconciles that make it, and what it packs is as settled a
	// moment later.
	packQuietFor   = time.Second
	packBusyBudget = 32 << 20
)

// inflaters are the decompressors of packed JSON.
var inflaters = gosync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}

// size is the length of the resource's JSON.
func (e *modelResource) size() int {
	if e.packed() {
		return int(e.n)
	}
	return len(e.json)
}

// packed reports whether the resource's JSON is held compressed.
func (e *modelResource) packed() bool {
	return e.dict != nil
}

// writeTo writes the resource's JSON to w in one Write, as an unpacked
// one is: whatever masks the answer (see Options.Wrap) sees each resource
// whole, never a secret cut in two.
func (e *modelResource) writeTo(w io.Writer) error {
	if !e.packed() {
		_, err := w.Write(e.json)
		return err
	}
	bp := encodeBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBuf {
			encodeBufs.Put(bp)
		}
	}()
	b, err := e.appendJSON((*bp)[:0])
	*bp = b
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// appendJSON appends the resource's JSON to b, unpacking it if need be.
func (e *modelResource) appendJSON(b []byte) ([]byte, error) {
	if !e.packed() {
		return append(b, e.json...), nil
	}
	r := inflaters.Get().(io.ReadCloser)
	defer inflaters.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(e.json), *e.dict); err != nil {
		return b, err
	}
	start, n := len(b), int(e.n)
	b = slices.Grow(b, n)[:start+n]
	if _, err := io.ReadFull(r, b[start:]); err != nil {
		return b[:start], fmt.Errorf("resource %d: unpacking: %w", e.id, err)
	}
	return b, nil
}

// runPacker packs settled resources until ctx is done.
func (m *readModel) runPacker(ctx context.Context) {
	tick := time.NewTicker(packEvery)
	defer tick.Stop()
	p := &packer{dicts: map[string]*[]byte{}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.pack(ctx, p, time.Now().Add(-packAfter))
		}
	}
}

// packer is the packer's state: a dictionary per kind, kept for as long
// as the model (resources packed against one point at it).
type packer struct {
	dicts map[string]*[]byte
	buf   bytes.Buffer
}

// pack packs the resources made before cutoff (those settling, before
// cutoff less what they wait longer), a batch at a time, so that the write
// lock is held briefly.
func (m *readModel) pack(ctx context.Context, p *packer, cutoff time.Time) {
	const batch = 512
	var (
		todo     []*modelResource
		unpacked int
	)
	before, settlingBefore := cutoff.UnixNano(), cutoff.Add(packAfter-packSettlingAfter).UnixNano()
	m.mu.RLock()
	for _, id := range m.ids {
		if e := m.byID[id]; !e.packed() {
			unpacked += len(e.json)
			if e.madeAt < before && (!e.settling || e.madeAt < settlingBefore) {
				todo = append(todo, e)
			}
		}
	}
	m.mu.RUnlock()
	if time.Since(time.Unix(0, m.burstAt.Load())) < packQuietFor && unpacked < m.packBudget {
		return
	}
	writers := map[*[]byte]*flate.Writer{}
	freed := 0
	defer func() {
		// What packing let go of is garbage no allocation will make the
		// collector look at soon.
		if freed >= packReleased && m.released != nil {
			m.released()
		}
	}()
	for len(todo) > 0 && ctx.Err() == nil {
		n := min(batch, len(todo))
		type swap struct{ old, packed *modelResource }
		done := make([]swap, 0, n)
		for _, e := range todo[:n] {
			dict := p.dicts[e.kind]
			if dict == nil {
				// The first of its kind is the dictionary, and is left
				// unpacked: compressed against itself it would cost little,
				// but its bytes are kept anyway.
				d := e.json
				p.dicts[e.kind] = &d
				continue
			}
			w := writers[dict]
			p.buf.Reset()
			if w == nil {
				var err error
				if w, err = flate.NewWriterDict(&p.buf, packLevel, *dict); err != nil {
					m.log.Warn("read model: cannot pack", "error", err)
					return
				}
				writers[dict] = w
			} else {
				w.Reset(&p.buf)
			}
			if _, err := w.Write(e.json); err != nil {
				continue
			}
			if err := w.Close(); err != nil {
				continue
			}
			if p.buf.Len() >= len(e.json) {
				continue
			}
			packed := *e
			packed.json, packed.n, packed.dict = bytes.Clone(p.buf.Bytes()), int32(len(e.json)), dict
			done = append(done, swap{e, &packed})
		}
		todo = todo[n:]
		m.mu.Lock()
		for _, s := range done {
			// Only if unchanged meanwhile: a newer row stays as it is.
			if m.byID[s.old.id] == s.old {
				m.repackLocked(s.old, s.packed)
				freed += len(s.old.json) - len(s.packed.json)
			}
		}
		m.mu.Unlock()
	}
}
