// Package codepages lets an idle agent give back the pages of its own
// program's code and read-only data that the kernel mapped in.
//
// The kernel maps an executable's file pages in large runs as they are
// first touched (fault-around, large folios), so that shortly after start
// nearly the whole program, tens of megabytes, counts in the agent's
// resident size, although an idle agent runs a small part of it. Those
// pages are clean copies of the file: dropping them from the process
// loses nothing. They stay in the page cache, from where a later touch
// maps them again at the cost of a minor fault, and where the kernel may
// reclaim them sooner than mapped ones when memory is short.
package codepages

// Released is what Release let go of.
type Released struct {
	// Mappings is how many mappings of the executable were released.
	Mappings int
	// Bytes is their size, resident or not.
	Bytes uint64
}
