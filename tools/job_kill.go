package tools

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/shiroagent/shiro/tools/jobs"
)

//go:embed job_kill.md
var jobKillDoc string

type jobKillParams struct {
	ID string `json:"id" desc:"The job's id (job-1, ...)."`
}

// NewJobKill returns the job_kill tool.
func NewJobKill() Tool {
	return newFileTool("job_kill", SetCore, false, jobKillDoc, runJobKill)
}

func runJobKill(ctx context.Context, env *Env, p *jobKillParams) (Result, error) {
	j, res := findJob(env, "job_kill", p.ID)
	if j == nil {
		return res, nil
	}
	before := j.Status()
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	st, err := env.Jobs.Kill(kctx, j.ID())
	if err != nil {
		return Result{}, fmt.Errorf("kill %s: %w", j.ID(), err)
	}
	r := j.Read(ctx, jobs.ReadOptions{Tail: 5})
	text := fmt.Sprintf("%s %s after %s (its whole process tree).", st.ID, st.Ending(), st.Uptime(time.Now()))
	if !before.Running() {
		text = fmt.Sprintf("%s had already ended: %s.", st.ID, st.Ending())
	}
	if out := strings.TrimRight(TextOrBinary(r.Data), "\n"); out != "" {
		text += "\nlast output:\n" + out
	}
	return Text(text), nil
}
