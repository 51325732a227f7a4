package docker

import (
	"bufio"
	"bytes"
	"context"
	"strings"

	"github.com/shiroagent/shiro/sandbox"
)

// ImagePlan says what resolving an image setting would do (the shared
// type: every backend plans for the trust question).
type ImagePlan = sandbox.ImagePlan

// PlanImage reads what req.Spec names (confined to the workspace as for
// ResolveImage) and says what resolving it would do. An unreadable file is
// an error; the plan then holds what was known.
func PlanImage(req ImageRequest) (ImagePlan, error) {
	if err := req.Validate(); err != nil {
		return ImagePlan{}, err
	}
	kind, p := ClassifyImage(req.Spec)
	plan := ImagePlan{Kind: kind}
	if kind == KindReference {
		plan.Ref = p
		return plan, nil
	}
	loc, err := newLocator(req)
	if err != nil {
		return plan, err
	}
	if kind == KindDevcontainer && p == DevcontainerWord {
		if p, err = loc.findDevcontainer(); err != nil {
			return plan, err
		}
	}
	at, err := loc.place(p, req.Workspace)
	if err != nil {
		return plan, err
	}
	if kind == KindDockerfile && loc.isDir(at) {
		at = at.join("Dockerfile")
	}
	plan.Source = at.abs
	df := at
	if kind == KindDevcontainer {
		data, err := loc.readFile(at, maxDevcontainerSize+1)
		if err != nil {
			return plan, err
		}
		dc, err := parseDevcontainer(data, at.abs, req.Workspace)
		if err != nil {
			return plan, err
		}
		// A Compose service's image or build. PlanImage takes no context:
		// this reads a bounded number of small local files.
		if err := dc.loadCompose(context.TODO(), loc, at); err != nil {
			return plan, err
		}
		if dc.Image != "" {
			plan.Ref = dc.Image
			return plan, nil
		}
		if at.inside {
			loc.trusted = false
		}
		if df, err = loc.place(dc.Dockerfile, at.dir().abs); err != nil {
			return plan, err
		}
	}
	plan.Dockerfile = df.abs
	data, err := loc.readFile(df, maxDockerfile)
	if err != nil {
		return plan, err
	}
	plan.Bases = dockerfileBases(data)
	return plan, nil
}

// dockerfileBases lists the images a Dockerfile's FROM lines name, with
// line continuations joined, flags (--platform) skipped and stages named
// earlier left out. ${SHIRO_BASE_IMAGE} is shown as written.
func dockerfileBases(df []byte) []string {
	var (
		out    []string
		stages = map[string]bool{}
		line   strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(df))
	sc.Buffer(make([]byte, 64<<10), maxDockerfile)
	flush := func() {
		fields := strings.Fields(line.String())
		line.Reset()
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			return
		}
		fields = fields[1:]
		for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
			fields = fields[1:]
		}
		if len(fields) == 0 {
			return
		}
		if !stages[strings.ToLower(fields[0])] {
			out = append(out, fields[0])
		}
		if len(fields) >= 3 && strings.EqualFold(fields[1], "AS") {
			stages[strings.ToLower(fields[2])] = true
		}
	}
	for sc.Scan() {
		t := strings.TrimSpace(sc.Text())
		if line.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(t, "\\"); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(t)
		flush()
	}
	flush()
	return out
}
