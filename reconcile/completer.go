package reconcile

import (
	"context"

	"github.com/no8s/no8s-agent/store"
)

// maxCompletionBatch caps how many completions one write carries.
const maxCompletionBatch = 64

// completion is a worker's outcome on its way to the store, and where the
// worker waits for what became of it.
type completion struct {
	cl    *store.Claim
	done  store.Completion
	reply chan store.CompletionResult
}

// completer writes the completions of a controller's workers. It writes
// whatever has come in as soon as it is free: a completion alone is
// written at once, while those that come in during a write go together in
// the next one, one transaction for them all. Run owns its goroutine.
//
// A worker is free for its next claim once its completion is queued, as
// the lease keeps the resource from any other worker until it is written:
// claims and actions go on while completions are written.
type completer struct {
	st  store.Store
	in  chan completion
	max int
}

// newCompleter returns a completer that queues up to workers completions
// while it writes: a worker whose completion is queued is free for other
// work, one that finds the queue full waits.
func newCompleter(st store.Store, workers int) *completer {
	return &completer{st: st, in: make(chan completion, workers), max: maxCompletionBatch}
}

// complete hands a completion to the completer, calls handed once it is
// taken, and waits for its result. It must not be called after close.
func (cp *completer) complete(cl *store.Claim, done store.Completion, handed func()) store.CompletionResult {
	reply := make(chan store.CompletionResult, 1)
	cp.in <- completion{cl: cl, done: done, reply: reply}
	handed()
	return <-reply
}

// close says that no more completions come; run returns once it has
// written those it has.
func (cp *completer) close() { close(cp.in) }

// run writes completions until close. It does not stop when ctx is done:
// the completions of the workers still stopping must be written (or their
// leases expire), so Run closes it once every worker has its result. Its
// writes are bounded by completionWriteTimeout instead.
func (cp *completer) run(ctx context.Context) {
	for first := range cp.in {
		batch := []completion{first}
	more:
		for len(batch) < cp.max {
			select {
			case next, ok := <-cp.in:
				if !ok {
					break more
				}
				batch = append(batch, next)
			default:
				break more
			}
		}
		cp.write(ctx, batch)
	}
}

// write writes one batch and hands each worker its result.
func (cp *completer) write(ctx context.Context, batch []completion) {
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionWriteTimeout)
	defer cancel()
	in := make([]store.ClaimCompletion, len(batch))
	for i, c := range batch {
		in[i] = store.ClaimCompletion{Claim: c.cl, Done: c.done}
	}
	results := cp.st.CompleteReconciles(writeCtx, in)
	for i, c := range batch {
		c.reply <- results[i]
	}
}
