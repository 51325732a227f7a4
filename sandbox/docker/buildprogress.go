package docker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	controlapi "github.com/moby/buildkit/api/services/control"
	"google.golang.org/protobuf/proto"

	"github.com/shiroagent/shiro/sandbox"
)

// buildkitTraceID is the id of the stream messages whose aux is a
// BuildKit status (a base64 protobuf control.StatusResponse).
const buildkitTraceID = "moby.buildkit.trace"

// buildkitTrace turns BuildKit's status messages into lines, as the
// docker CLI's plain progress does: "#3 [2/4] RUN …" when a step starts,
// its output, then "#3 CACHED", "#3 DONE 0.4s" or "#3 ERROR: …".
type buildkitTrace struct {
	w      io.Writer
	redact func(string) string
	byDig  map[string]*traceVertex
	done   int
	// failed is the name of the last step that failed, for the error.
	failed string
}

// traceVertex is one step of the build as the trace has shown it.
type traceVertex struct {
	n       int // its "#n" in the lines
	name    string
	started bool
	ended   bool
	pending []byte // output after its last newline
}

func newBuildkitTrace(w io.Writer, redact func(string) string) *buildkitTrace {
	t := &buildkitTrace{w: w, redact: redact, byDig: map[string]*traceVertex{}}
	if t.redact == nil {
		t.redact = func(s string) string { return s }
	}
	return t
}

// add decodes one aux value (a JSON string holding base64 protobuf) and
// writes what it says.
func (t *buildkitTrace) add(aux json.RawMessage) error {
	var raw []byte
	if err := json.Unmarshal(aux, &raw); err != nil {
		return fmt.Errorf("read build status: %w", err)
	}
	var st controlapi.StatusResponse
	if err := proto.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("read build status: %w", err)
	}
	counted := len(t.byDig)
	doneBefore := t.done
	for _, v := range st.Vertexes {
		tv := t.vertex(v.Digest)
		if v.Name != "" {
			tv.name = v.Name
		}
		if !tv.started && (v.Started != nil || v.Cached) {
			tv.started = true
			fmt.Fprintf(t.w, "#%d %s\n", tv.n, t.redact(tv.name))
		}
		if tv.ended {
			continue
		}
		switch {
		case v.Error != "":
			t.flush(tv)
			tv.ended = true
			t.done++
			t.failed = tv.name
			fmt.Fprintf(t.w, "#%d ERROR: %s\n", tv.n, t.redact(v.Error))
		case v.Cached:
			tv.ended = true
			t.done++
			fmt.Fprintf(t.w, "#%d CACHED\n", tv.n)
		case v.Completed != nil:
			t.flush(tv)
			tv.ended = true
			t.done++
			var d time.Duration
			if v.Started != nil {
				d = v.Completed.AsTime().Sub(v.Started.AsTime())
			}
			fmt.Fprintf(t.w, "#%d DONE %.1fs\n", tv.n, d.Seconds())
		}
	}
	for _, s := range st.Statuses {
		tv := t.vertex(s.Vertex)
		if s.Completed != nil && s.Total > 0 {
			fmt.Fprintf(t.w, "#%d %s %s done\n", tv.n, s.ID, sandbox.HumanBytes(s.Total))
		}
	}
	for _, l := range st.Logs {
		tv := t.vertex(l.Vertex)
		tv.pending = append(tv.pending, l.Msg...)
		for {
			i := bytes.IndexByte(tv.pending, '\n')
			if i < 0 {
				break
			}
			fmt.Fprintf(t.w, "#%d %s\n", tv.n, t.redact(strings.TrimRight(string(tv.pending[:i]), "\r")))
			tv.pending = tv.pending[i+1:]
		}
	}
	if len(t.byDig) != counted || t.done != doneBefore {
		sandbox.ReportTotal(t.w, sandbox.Total{Build: true, Done: int64(t.done), Of: int64(len(t.byDig))})
	}
	return nil
}

// vertex is the step with digest d, numbered when first seen.
func (t *buildkitTrace) vertex(d string) *traceVertex {
	tv, ok := t.byDig[d]
	if !ok {
		tv = &traceVertex{n: len(t.byDig) + 1}
		t.byDig[d] = tv
	}
	return tv
}

// flush writes a step's output that did not end in a newline.
func (t *buildkitTrace) flush(tv *traceVertex) {
	if len(tv.pending) > 0 {
		fmt.Fprintf(t.w, "#%d %s\n", tv.n, t.redact(string(tv.pending)))
		tv.pending = nil
	}
}

// stepError is the engine's error as an *ImageBuildError naming the step
// that failed ("[2/4] RUN make" gives step 2/4 and the instruction).
func (t *buildkitTrace) stepError(msg string) *ImageBuildError {
	e := &ImageBuildError{Message: strings.TrimSpace(t.redact(msg))}
	name := t.redact(t.failed)
	if rest, ok := strings.CutPrefix(name, "["); ok {
		if n, ins, ok := strings.Cut(rest, "] "); ok {
			if i := strings.LastIndex(n, " "); i >= 0 {
				n = n[i+1:] // "[build 2/4]" names the stage too
			}
			e.Step, e.Instruction = strings.TrimSpace(n), strings.TrimSpace(ins)
			return e
		}
	}
	e.Instruction = name
	return e
}
