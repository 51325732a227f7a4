package tools

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/shiroagent/shiro/tools/jobs"
)

//go:embed job_input.md
var jobInputDoc string

type jobInputParams struct {
	ID    string `json:"id" desc:"The job's id (job-1, ...); it must have been started with stdin: true."`
	Text  string `json:"text,omitempty" desc:"Text to write to the job's stdin, as it is: end a line with \n."`
	Close bool   `json:"close,omitempty" jsonschema:"default=false" desc:"Close the job's stdin after the text (the job then reads end-of-file)."`
}

// jobInputWait is how long job_input waits for the job to answer, to show
// what it printed.
const jobInputWait = 500 * time.Millisecond

// NewJobInput returns the job_input tool.
func NewJobInput() Tool {
	return newFileTool("job_input", SetCore, true, jobInputDoc, runJobInput)
}

func runJobInput(ctx context.Context, env *Env, p *jobInputParams) (Result, error) {
	j, res := findJob(env, "job_input", p.ID)
	if j == nil {
		return res, nil
	}
	if p.Text == "" && !p.Close {
		return Errorf("Invalid input for job_input: give text, close, or both"), nil
	}
	since := j.Output().Total()
	switch err := j.Input(p.Text, p.Close); {
	case errors.Is(err, jobs.ErrNoStdin):
		return Errorf("%s was not started with stdin: true, so it has no input to write to; start it again with bash {run_in_background: true, stdin: true}", j.ID()), nil
	case errors.Is(err, jobs.ErrStdinClosed):
		return Errorf("%s: its stdin is closed (%s)", j.ID(), j.Status().Ending()), nil
	case err != nil:
		return Result{}, fmt.Errorf("write to %s: %w", j.ID(), err)
	}
	r := j.Read(ctx, jobs.ReadOptions{Since: &since, Wait: jobInputWait})
	msg := fmt.Sprintf("wrote %d bytes to %s's stdin", len(p.Text), j.ID())
	if p.Close {
		msg += " and closed it"
	}
	return Text(msg + ".\n" + renderRead(r)), nil
}
