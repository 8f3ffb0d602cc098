package reconcile

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/no8s/no8s-agent/store"
)

// maxCompletionBatch caps how many completions one write carries.
const maxCompletionBatch = 64

// completionGather is how long the completer waits for more completions
// before a write, while attempts are still running: a write costs the store
// about as much for one completion as for several.
const completionGather = 3 * time.Millisecond

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
//
// While attempts are running whose completions have not come in, the
// completer waits up to completionGather for them before it writes, so
// that the completions of quick actions go in batches rather than one by
// one; a completion with no attempt running is written at once.
type completer struct {
	st  store.Store
	in  chan completion
	max int
	// gather is how long a write waits for more completions (zero: none).
	gather time.Duration
	// running counts the attempts whose completion may still come: those
	// expected and neither handed in nor forgone.
	running atomic.Int64
}

// newCompleter returns a completer that queues up to a batch of
// completions, and at least one per worker, while it writes: a worker whose
// completion is queued is free for other work, one that finds the queue
// full waits. Quick actions finish faster than one write: a queue of a
// batch keeps their workers busy while the completer writes. Without
// gather, it writes at once and queues one completion per worker.
func newCompleter(st store.Store, workers int, gather bool) *completer {
	if !gather {
		return &completer{st: st, in: make(chan completion, workers), max: maxCompletionBatch}
	}
	return &completer{st: st, in: make(chan completion, max(workers, maxCompletionBatch)), max: maxCompletionBatch,
		gather: completionGather}
}

// expect says that n attempts started, each of which will hand in a
// completion or forgo it.
func (cp *completer) expect(n int) { cp.running.Add(int64(n)) }

// forgo says that an expected completion will not come (its result was
// discarded).
func (cp *completer) forgo() { cp.running.Add(-1) }

// complete hands a completion to the completer, calls handed once it is
// taken, and waits for its result. It must not be called after close.
func (cp *completer) complete(cl *store.Claim, done store.Completion, handed func()) store.CompletionResult {
	reply := make(chan store.CompletionResult, 1)
	cp.running.Add(-1)
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
	gather := time.NewTimer(0)
	defer gather.Stop()
	for first := range cp.in {
		batch := []completion{first}
		gathering := false
	more:
		for len(batch) < cp.max {
			select {
			case next, ok := <-cp.in:
				if !ok {
					break more
				}
				batch = append(batch, next)
				continue
			default:
			}
			if cp.gather <= 0 || cp.running.Load() <= 0 {
				break
			}
			if !gathering {
				gathering = true
				gather.Reset(cp.gather)
			}
			select {
			case next, ok := <-cp.in:
				if !ok {
					break more
				}
				batch = append(batch, next)
			case <-gather.C:
				break more
			}
		}
		gather.Stop()
		cp.write(ctx, batch)
	}
}

// write writes one batch and hands each worker its result.
func (cp *completer) write(ctx context.Context, batch []completion) {
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), completionWriteTimeout)
	defer cancel()
	in := make([]store.ClaimCompletion, len(batch))
	for i, c := range batch {
		// Workers are told only whether their completion was written.
		in[i] = store.ClaimCompletion{Claim: c.cl, Done: c.done, ErrOnly: true}
	}
	results := cp.st.CompleteReconciles(writeCtx, in)
	for i, c := range batch {
		c.reply <- results[i]
	}
}
