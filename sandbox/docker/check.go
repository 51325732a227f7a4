package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/sandbox"
)

// Protection is one of the sandbox's promises as `shiro doctor` checks it
// on the live container.
type Protection struct {
	Name string
	OK   bool
	// Detail says what holds, or what is missing.
	Detail string
	// Fix says what to do when it is missing.
	Fix string
}

// Protections checks, on the session's container, that everything the
// git boundary and the hardening promise is in place: the container is
// what shiro would make, the sandbox's .git is its own and cannot be
// renamed away, the helper is not the command user's to replace, /tmp is
// limited, and no repository in the workspace is left where git on the
// host would use it.
func (s *Sandbox) Protections(ctx context.Context) []Protection {
	var out []Protection
	add := func(name string, ok bool, detail, fix string) {
		out = append(out, Protection{Name: name, OK: ok, Detail: detail, Fix: fix})
	}
	const rebuild = "remove the sandbox container (`shiro sandbox rm`); the next session makes one that has it"
	s.conn.Lock()
	c := s.c
	s.conn.Unlock()
	info, err := s.e.ctr.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil {
		add("container", false, "cannot inspect the container: "+err.Error(), "")
		return out
	}
	h, _ := loadHelper(s.opts.HelperBinary)
	p := s.e.plan(s.opts, info.Container.Image, s.wsID, s.git.plan, h)
	if why := s.e.mismatch(info.Container, p); why != "" {
		add("container", false, "the container is not what shiro would make: "+why, rebuild)
	} else {
		add("container", true, fmt.Sprintf("made by your shiro, as your user, no capabilities, no-new-privileges, /tmp limited to %s", formatSize(p.spec.tmpSize())), "")
	}

	run := func(shell string) (string, int) {
		var buf bytes.Buffer
		res, err := s.Run(ctx, sandbox.Command{Shell: shell + " 2>&1", Stdout: &buf, Timeout: 30 * time.Second})
		if err != nil {
			return err.Error(), -1
		}
		return buf.String(), res.ExitCode
	}

	helperPath := s.helper.helperPath()
	_, writable := run(fmt.Sprintf("test -w %s || test -w %s/bin || : > %s/bin/probe", helperPath, helperDir, helperDir))
	// A helper the command user can read would run dumpable: its
	// processes would be the command's to trace.
	_, readable := run(fmt.Sprintf("head -c1 %s >/dev/null || cat /proc/1/environ >/dev/null", helperPath))
	switch {
	case writable == 0:
		add("helper", false, "the command user can change the helper or its directory", rebuild)
	case readable == 0:
		add("helper", false, "the command user can read the helper or PID 1's environment: the helper's processes are within a command's reach", rebuild)
	default:
		add("helper", true, "read-only, not readable by your commands, and its processes (PID 1, the channel, reapers, forwarder) out of their reach", "")
	}

	repo := s.git.plan.Repo
	if repo == nil {
		add("git", true, "no repository to mirror; repositories the sandbox makes in the workspace are moved out of your reach after every command", "")
	} else {
		probe := "shiro-doctor-" + randomSuffix()
		hostProbe := filepath.Join(repo.CommonDir, probe)
		defer os.Remove(hostProbe)
		out1, code1 := run(fmt.Sprintf(": > %q/%s && rm -f %q/%s", repo.CommonDir, probe, repo.CommonDir, probe))
		_, statErr := os.Lstat(hostProbe)
		out2, code2 := run(fmt.Sprintf("mv %q %q.shiro-doctor", repo.DotGit, repo.DotGit))
		switch {
		case code1 != 0:
			add("git", false, "the sandbox cannot write its own .git: "+strings.TrimSpace(out1), rebuild)
		case statErr == nil:
			add("git", false, "what the sandbox writes in .git reaches your repository", rebuild)
		case code2 == 0:
			run(fmt.Sprintf("mv %q.shiro-doctor %q", repo.DotGit, repo.DotGit))
			add("git", false, "the sandbox can rename .git away", rebuild)
		default:
			_ = out2 // the rename's refusal (device or resource busy) is the expected answer
			add("git", true, fmt.Sprintf("the sandbox works on its own copy of %s; only objects, refs, HEAD and the index come back, checked", repo.CommonDir), "")
		}
	}

	// Anything else running with the workspace mounted (a container of an
	// older shiro, someone's docker run -v) is outside the boundary.
	if others := s.e.othersMounting(ctx, s.opts.Workspace); len(others) > 0 {
		add("others", false, "other containers can write the workspace: "+strings.Join(others, ", ")+" (an older shiro's, or someone else's); they are outside the git boundary",
			"remove them (docker rm -f "+strings.Join(others, " ")+")")
	} else {
		add("others", true, "no other container has the workspace mounted", "")
	}

	found, err := s.git.scanner.Scan()
	switch {
	case err != nil:
		add("repositories", false, "cannot scan the workspace: "+err.Error(), "")
	case len(found) > 0:
		var paths []string
		for _, f := range found {
			paths = append(paths, f.Path)
		}
		add("repositories", false, "git on your machine would use what the sandbox may have made: "+strings.Join(paths, ", "),
			"start a shiro session here (its first scan moves them out of reach), or remove them")
	default:
		n := len(s.git.plan.ReadOnly)
		detail := "no repository in the workspace that git on your machine would take from the sandbox"
		if n > 0 {
			detail += fmt.Sprintf("; %d of yours mounted read-only", n)
		}
		add("repositories", true, detail, "")
	}
	return out
}

func formatSize(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%dg", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%dm", b>>20)
	}
	return fmt.Sprintf("%d bytes", b)
}

// othersMounting lists the running containers, other than this user's
// shiro's, that mount ws, a directory above it or one inside it.
func (e *Engine) othersMounting(ctx context.Context, ws string) []string {
	list, err := e.ctr.ContainerList(ctx, client.ContainerListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range list.Items {
		name := c.ID[:12]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if e.ownsContainer(c.ID, name, c.Labels) {
			continue
		}
		for _, m := range c.Mounts {
			if m.Type != "bind" || !m.RW {
				continue
			}
			src := filepath.Clean(m.Source)
			if src == ws || strings.HasPrefix(ws, src+"/") || strings.HasPrefix(src, ws+"/") {
				out = append(out, name)
				break
			}
		}
	}
	return out
}
