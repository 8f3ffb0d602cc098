package gitlabpipelines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/no8s/no8s-agent/action"
	"github.com/no8s/no8s-agent/gitlabapi"
	"github.com/no8s/no8s-agent/manifest"
)

// maxOutputsFile bounds the no8s-outputs.json files of a pipeline, each
// and together: outputs are stored with the resource and every history
// row.
const maxOutputsFile = 1 << 20

// Bounds of the log a failure quotes.
const (
	// logTailLines is how many lines of the failed job's log are quoted.
	logTailLines = 20
	// logTailBytes bounds the quote, whatever the lines' length.
	logTailBytes = 4 << 10
	// logReadBytes is how much of the end of the log is kept while it is
	// read: GitLab serves the whole log, which may be many megabytes.
	logReadBytes = 64 << 10
)

// Job is a job of the pipeline, as the outputs show it.
type Job struct {
	Name   string `json:"name"`
	Stage  string `json:"stage"`
	Status string `json:"status"`
	WebURL string `json:"web_url"`
	// PipelineID is the pipeline the job belongs to: the pipeline's own,
	// or a child pipeline's.
	PipelineID int64 `json:"pipeline_id"`
}

// reservedOutputs are the keys the plugin sets; the pipeline's own
// outputs may not replace them.
var reservedOutputs = []string{"pipeline_id", "pipeline_url", "status", "jobs"}

// finish turns a finished pipeline into the result: outputs on success, an
// error naming the pipeline, its failed job and the end of its log
// otherwise.
func (r *runner) finish(ctx context.Context, op action.Operation, pl *gitlab.Pipeline, steps []step) (*action.Result, error) {
	if pl.Status != "success" {
		return nil, r.failure(ctx, pl, steps)
	}
	out := map[string]any{}
	read := 0 // bytes of outputs files so far
	for _, s := range steps {
		if s.Bridge || !s.Archive || s.Status != "success" {
			continue
		}
		own, n, err := r.outputsOf(ctx, s, maxOutputsFile-read)
		if err != nil {
			if read > 0 && errors.Is(err, errOverLimit) {
				err = fmt.Errorf("with those of earlier jobs, %w", err)
			}
			return nil, fmt.Errorf("pipeline %s: job %q: artifact %s: %w", pl.WebURL, s.Name, OutputsFile, err)
		}
		read += n
		for k, v := range own {
			if !slices.Contains(reservedOutputs, k) {
				out[k] = v
			}
		}
	}
	out["pipeline_id"] = pl.ID
	out["pipeline_url"] = pl.WebURL
	out["status"] = pl.Status
	jobs := make([]Job, 0, len(steps))
	for _, s := range steps {
		jobs = append(jobs, Job{Name: s.Name, Stage: s.Stage, Status: s.Status, WebURL: s.WebURL, PipelineID: s.PipelineID})
	}
	out["jobs"] = jobs
	outputs, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	// A job may have written a token into its outputs; the agent masks
	// outputs too, but they should not leave the plugin with one.
	outputs = r.masker.MaskJSON(outputs)
	return &action.Result{Outputs: outputs, Message: fmt.Sprintf("pipeline %s succeeded", pl.WebURL),
		Conditions: []manifest.Condition{{Type: ConditionType, Status: manifest.ConditionTrue, Reason: "Succeeded",
			Message: fmt.Sprintf("%s: pipeline %s succeeded", op, pl.WebURL)}}}, nil
}

// errTooLarge is what a cappedBuffer answers past its limit.
var errTooLarge = errors.New("too large")

// errOverLimit says the outputs files are too large.
var errOverLimit = fmt.Errorf("over the limit of %d bytes", maxOutputsFile)

// cappedBuffer holds at most limit bytes, and fails past them. It does
// not embed bytes.Buffer: io.Copy would use the buffer's ReadFrom, past
// the limit.
type cappedBuffer struct {
	buf   bytes.Buffer
	limit int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.limit {
		return 0, errTooLarge
	}
	return b.buf.Write(p)
}

// outputsOf reads the JSON object of a job's no8s-outputs.json, of at
// most limit bytes, and returns it and its size; nil when the job uploaded
// none.
func (r *runner) outputsOf(ctx context.Context, s step, limit int) (map[string]any, int, error) {
	path := fmt.Sprintf("projects/%d/jobs/%d/artifacts/%s", s.ProjectID, s.ID, OutputsFile)
	buf := &cappedBuffer{limit: limit}
	err := r.retry.Call(ctx, func() (*gitlab.Response, error) {
		buf.buf.Reset()
		req, err := r.client.NewRequest(http.MethodGet, path, nil, []gitlab.RequestOptionFunc{gitlab.WithContext(ctx)})
		if err != nil {
			return nil, err
		}
		return r.client.Do(req, buf)
	})
	var ce *gitlabapi.ConfigError
	switch {
	case errors.As(err, &ce) && ce.Status == http.StatusNotFound:
		// The job uploaded artifacts, but not this file.
		return nil, 0, nil
	case errors.Is(err, errTooLarge):
		return nil, 0, errOverLimit
	case err != nil:
		return nil, 0, fmt.Errorf("download: %w", r.explain(err))
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(buf.buf.Bytes()))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, 0, fmt.Errorf("want a JSON object: %v", orNull(err))
	}
	if dec.More() {
		return nil, 0, errors.New("want one JSON object: data follows it")
	}
	return obj, buf.buf.Len(), nil
}

func orNull(err error) string {
	if err == nil {
		return "got null"
	}
	return err.Error()
}

// failure is the error of a pipeline that finished without success: its
// URL and status, and for a failed one the failed job, its stage, and the
// last lines of its log.
func (r *runner) failure(ctx context.Context, pl *gitlab.Pipeline, steps []step) error {
	msg := fmt.Sprintf("pipeline %s %s", pl.WebURL, pl.Status)
	s := failedStep(steps)
	if s == nil {
		return errors.New(msg)
	}
	msg += fmt.Sprintf(": job %q in stage %q failed", s.Name, s.Stage)
	if s.FailureReason != "" {
		msg += " (" + s.FailureReason + ")"
	}
	if s.ChildURL != "" {
		msg += " in child pipeline " + s.ChildURL
	}
	msg += ": " + s.WebURL
	if s.Bridge {
		return errors.New(msg)
	}
	tail, err := r.logTail(ctx, *s)
	switch {
	case err != nil:
		msg += fmt.Sprintf(" (its log could not be read: %v)", err)
	case tail != "":
		msg += "\nthe end of its log:\n" + tail
	}
	return errors.New(msg)
}

// failedStep is the job to blame: the first failed job that may not fail,
// in a child pipeline too; else the first failed trigger job.
func failedStep(steps []step) *step {
	for _, bridges := range []bool{false, true} {
		for i, s := range steps {
			if s.Status == "failed" && !s.AllowFailure && s.Bridge == bridges {
				return &steps[i]
			}
		}
	}
	return nil
}

// tailWriter keeps the last bytes written to it.
type tailWriter struct {
	buf   []byte
	limit int
	// written counts every byte written.
	written int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.written += len(p)
	w.buf = append(w.buf, p...)
	if len(w.buf) > 2*w.limit {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.limit:]...)
	}
	return len(p), nil
}

// tail returns the last limit bytes, and whether anything came before.
func (w *tailWriter) tail() (string, bool) {
	b := w.buf
	if len(b) > w.limit {
		b = b[len(b)-w.limit:]
	}
	return string(b), w.written > len(b)
}

// logTail reads a job's log and returns its last lines, cleaned of
// terminal control codes and with the tokens masked.
func (r *runner) logTail(ctx context.Context, s step) (string, error) {
	path := fmt.Sprintf("projects/%d/jobs/%d/trace", s.ProjectID, s.ID)
	w := &tailWriter{limit: logReadBytes}
	err := r.retry.Call(ctx, func() (*gitlab.Response, error) {
		*w = tailWriter{limit: logReadBytes}
		req, err := r.client.NewRequest(http.MethodGet, path, nil, []gitlab.RequestOptionFunc{gitlab.WithContext(ctx)})
		if err != nil {
			return nil, err
		}
		return r.client.Do(req, w)
	})
	if err != nil {
		return "", r.explain(err)
	}
	text, cut := w.tail()
	// The tail may begin inside a token: mask what is left of it, after
	// the control codes are gone, so that none hides a token.
	return lastLines(r.masker.MaskCut(cleanLog(text), cut, false), logTailLines, logTailBytes), nil
}

var (
	// ansiRE matches terminal escape sequences (colours, erase line).
	ansiRE = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]`)
	// sectionRE matches GitLab's collapsible section markers.
	sectionRE = regexp.MustCompile(`section_(?:start|end):[0-9]+:[^\r\n]*\r`)
)

// cleanLog turns a job log into what its page shows: no escape sequences
// or section markers, a line overwritten by a carriage return shown as
// its last state, no other control characters.
func cleanLog(s string) string {
	s = ansiRE.ReplaceAllString(s, "")
	s = sectionRE.ReplaceAllString(s, "")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = strings.Map(func(c rune) rune {
			if c < 0x20 && c != '\t' || c == 0x7f {
				return -1
			}
			return c
		}, l)
	}
	return strings.Join(lines, "\n")
}

// lastLines returns the last n lines of s (trailing blank lines dropped),
// at most maxBytes of them, each indented.
func lastLines(s string, n, maxBytes int) string {
	lines := strings.Split(strings.TrimRight(s, "\n\t "), "\n")
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		size += len(lines[i]) + 5
		if size > maxBytes {
			if i == len(lines)-1 {
				// One line too long: its end.
				l := lines[i]
				lines[i] = "…" + strings.ToValidUTF8(l[len(l)-min(len(l), maxBytes-10):], "")
				lines = lines[i:]
			} else {
				lines = lines[i+1:]
			}
			break
		}
	}
	return "    " + strings.Join(lines, "\n    ")
}
