package tools

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shiroagent/shiro/tools/jobs"
)

//go:embed job_output.md
var jobOutputDoc string

// JobMaxWait caps job_output's wait, in seconds.
const JobMaxWait = 60

// jobReadLimit is the most output bytes one job_output returns, so that
// the result fits the output cap whole and "next" is where it stopped.
const jobReadLimit = 24_000

type jobOutputParams struct {
	ID    string `json:"id" desc:"The job's id (job-1, ...), as its start returned it."`
	Since int    `json:"since,omitempty" jsonschema:"minimum=0" desc:"Byte offset to read from (the 'next' of an earlier read). Default: where the last job_output of this job ended."`
	Tail  int    `json:"tail,omitempty" jsonschema:"minimum=1,maximum=2000" desc:"Return the last N lines instead."`
	Wait  int    `json:"wait,omitempty" jsonschema:"minimum=0,maximum=60" desc:"Seconds to wait for new output or the job's end, when there is none yet."`
}

// NewJobOutput returns the job_output tool.
func NewJobOutput() Tool {
	return &jobOutputTool{newFileTool("job_output", SetCore, false, jobOutputDoc, runJobOutput)}
}

// jobOutputTool tells an explicit since of 0 from none.
type jobOutputTool struct{ *fileTool[jobOutputParams] }

func (t *jobOutputTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(input, &keys)
	_, hasSince := keys["since"]
	return t.fileTool.Run(context.WithValue(ctx, sinceKey{}, hasSince), env, input)
}

type sinceKey struct{}

func runJobOutput(ctx context.Context, env *Env, p *jobOutputParams) (Result, error) {
	j, res := findJob(env, "job_output", p.ID)
	if j == nil {
		return res, nil
	}
	o := jobs.ReadOptions{Tail: p.Tail, Wait: time.Duration(min(p.Wait, JobMaxWait)) * time.Second, Limit: jobReadLimit}
	if has, _ := ctx.Value(sinceKey{}).(bool); has {
		if p.Tail > 0 {
			return Errorf("Invalid input for job_output: give since or tail, not both"), nil
		}
		since := int64(p.Since)
		o.Since = &since
	}
	r := j.Read(ctx, o)
	return Text(renderRead(r)), nil
}

// renderRead shows a read: the job's state, the offsets, the output.
func renderRead(r jobs.Read) string {
	st := r.Status
	head := fmt.Sprintf("%s: %s", st.ID, st.Ending())
	if st.Running() {
		head += fmt.Sprintf(" (for %s)", st.Uptime(time.Now()))
	}
	parts := []string{head + fmt.Sprintf("\noutput bytes %d-%d of %d (next: %d)", r.From, r.Next, st.Output, r.Next)}
	if r.Next < st.Output {
		parts = append(parts, fmt.Sprintf("[%d more bytes after these: read on with since=%d]", st.Output-r.Next, r.Next))
	}
	if m := r.Marker(); m != "" {
		parts = append(parts, m)
	}
	if out := strings.TrimRight(TextOrBinary(r.Data), "\n"); out != "" {
		parts = append(parts, out)
	} else {
		parts = append(parts, "(no new output)")
	}
	return strings.Join(parts, "\n")
}

// findJob is the job id names, or the error result for the model.
func findJob(env *Env, tool, id string) (*jobs.Job, Result) {
	if env.Jobs == nil {
		return nil, Errorf("Background jobs are not available here: nothing outlives this call")
	}
	j, err := env.Jobs.Get(strings.TrimSpace(id))
	if errors.Is(err, jobs.ErrNoJob) {
		known := "there are no jobs in this session"
		if ids := env.Jobs.IDs(); len(ids) > 0 {
			known = "jobs: " + strings.Join(ids, ", ")
		}
		return nil, Errorf("Invalid input for %s: no job %q (%s)", tool, id, known)
	}
	return j, Result{}
}
