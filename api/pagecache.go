package api

import (
	"slices"
	"strconv"
	"strings"
	gosync "sync"

	"github.com/no8s/no8s-agent/store"
)

// Limits of the prepared pages kept for reuse.
const (
	// maxCachedPages is how many prepared pages are kept.
	maxCachedPages = 8
	// maxCachedPageBytes is the most bytes of pages kept in all.
	maxCachedPageBytes = 8 << 20
)

// pageCache keeps the last pages of resources prepared, with the state of
// the read model they were prepared from. Clients that poll the same list
// (a dashboard, a script in a loop, many of them) then cost one
// preparation per change of the resources, not one per request. A page
// depends on nothing but its filter, cursor and limit and the resources:
// grants are checked on the filter before a page is looked up, and narrow
// it to the namespaces the token holds, which are part of the filter; what
// is masked is masked in the copy itself.
type pageCache struct {
	mu    gosync.Mutex
	pages []*cachedPage // least recently used first
	bytes int
}

// cachedPage is one prepared page.
type cachedPage struct {
	key string
	// seq is the read model's resourcesSeq the page was prepared at.
	seq uint64
	// body is the page as sent; never changed once cached.
	body []byte
	// rows and last are how many resources it holds and the last one's ID.
	rows int
	last int64
}

// pageKey names what a page depends on besides the resources.
func pageKey(f *store.ResourceFilter) string {
	var b strings.Builder
	for _, s := range []string{f.Kind, string(f.Phase), f.Action, f.Source} {
		b.WriteString(strconv.Quote(s))
	}
	if f.Namespaces != nil {
		b.WriteString(" ns")
		for _, ns := range f.Namespaces {
			b.WriteString(strconv.Quote(ns))
		}
	}
	keys := make([]string, 0, len(f.Labels))
	for k := range f.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(strconv.Quote(k))
		b.WriteString(strconv.Quote(f.Labels[k]))
	}
	b.WriteByte(' ')
	b.WriteString(strconv.FormatInt(f.After, 10))
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(f.Limit))
	return b.String()
}

// get returns the page for key prepared at seq or later, if kept. A page
// prepared from resources as they were when the request came in, or as
// they became after, is as current as the reader may ask for.
func (c *pageCache) get(key string, seq uint64) *cachedPage {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.pages {
		if p.key != key {
			continue
		}
		if p.seq < seq {
			// Prepared from resources that have changed since.
			c.removeLocked(i)
			return nil
		}
		// Most recently used last.
		c.pages = append(slices.Delete(c.pages, i, i+1), p)
		return p
	}
	return nil
}

// put keeps p, in place of any page for the same key, dropping the least
// recently used pages beyond the limits. A page larger than a quarter of
// them all is not kept.
func (c *pageCache) put(p *cachedPage) {
	if len(p.body) > maxCachedPageBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.IndexFunc(c.pages, func(q *cachedPage) bool { return q.key == p.key }); i >= 0 {
		if c.pages[i].seq > p.seq {
			return // a newer one is kept already
		}
		c.removeLocked(i)
	}
	c.pages = append(c.pages, p)
	c.bytes += len(p.body)
	for len(c.pages) > maxCachedPages || c.bytes > maxCachedPageBytes {
		c.removeLocked(0)
	}
}

// clear drops every page: the memory goes back when the agent is idle.
func (c *pageCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pages, c.bytes = nil, 0
}

func (c *pageCache) removeLocked(i int) {
	c.bytes -= len(c.pages[i].body)
	c.pages = slices.Delete(c.pages, i, i+1)
}
