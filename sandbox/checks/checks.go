// Package checks holds the doctor's checks that every backend runs in a
// sandbox it opened: the image's tools, and how the sandbox holds the
// workspace.
package checks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/shiroagent/shiro/internal/workspace"
	"github.com/shiroagent/shiro/sandbox"
)

// versionPattern finds a version number in a --version line.
var versionPattern = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// imageTools are what shiro's container-side tools need, and what a
// missing one costs.
var imageTools = []struct{ name, without string }{
	{"bash", "the bash tool falls back to sh"},
	{"rg", "grep falls back to a slower Go search"},
	{"git", "the git tools fall back to a built-in reader"},
}

// Tools checks that the image has bash, rg and git.
func Tools(ctx context.Context, sb sandbox.Sandbox, r sandbox.Report) {
	var found, missing []string
	for _, t := range imageTools {
		var out bytes.Buffer
		res, err := sb.Run(ctx, sandbox.Command{Args: []string{t.name, "--version"}, Stdout: &out, Timeout: 30 * time.Second})
		switch {
		case errors.Is(err, exec.ErrNotFound):
			missing = append(missing, t.name)
		case err != nil:
			r.Fail("tools", fmt.Sprintf("running %s in the sandbox failed: %v", t.name, err), "")
			return
		case res.ExitCode != 0:
			missing = append(missing, t.name+" (exits "+fmt.Sprint(res.ExitCode)+")")
		default:
			v := versionPattern.FindString(out.String())
			found = append(found, strings.TrimSpace(t.name+" "+v))
		}
	}
	if len(missing) == 0 {
		r.OK("tools", "%s", strings.Join(found, ", "))
		return
	}
	var costs []string
	for _, t := range imageTools {
		for _, m := range missing {
			if strings.HasPrefix(m, t.name) {
				costs = append(costs, t.without)
			}
		}
	}
	r.Fail("tools", "the image lacks "+strings.Join(missing, ", ")+" ("+strings.Join(costs, "; ")+")",
		"install them in the image (Debian: apt-get install bash ripgrep git), or use the built-in image")
}

// probeName is a fresh name for a file a check writes in the sandbox.
func probeName() string {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	return ".shiro-doctor-" + hex.EncodeToString(suffix[:])
}

// Workspace writes a file from a sandbox that mounts the workspace w and
// looks at its owner on this side, through w's root; w's gate removes it.
// It reports whether the sandbox works well enough for the protections to
// be checked.
func Workspace(ctx context.Context, sb sandbox.Sandbox, w *workspace.Workspace, r sandbox.Report) bool {
	name := probeName()
	// The sandbox may have put anything there since: the gate removes
	// what is at the name, never through a symlink.
	defer func() { _ = w.Gate().Remove(name) }()
	res, err := sb.Run(ctx, sandbox.Command{Shell: ": > " + name, Timeout: 30 * time.Second})
	if errors.Is(err, sandbox.ErrNoShell) {
		r.Fail("workspace", "not checked: the image has no shell", "use an image with sh or bash")
		return false
	}
	if err != nil || res.ExitCode != 0 {
		r.Fail("workspace", fmt.Sprintf("the sandbox cannot write the workspace (exit %d, %v)", res.ExitCode, err),
			"check the workspace's permissions; on SELinux hosts the engine may need the directory labelled (chcon -t container_file_t)")
		return false
	}
	fi, err := w.Root().Lstat(name)
	if err != nil {
		r.Fail("workspace", "a file written in the sandbox is not in the workspace: "+err.Error(),
			"the engine cannot bind-mount this directory (a remote engine, or Docker Desktop without file sharing for it)")
		return false
	}
	uid, gid, known := fileOwner(fi)
	me, myGID := os.Getuid(), os.Getgid()
	if known && (uid != me || gid != myGID) {
		r.Fail("workspace", fmt.Sprintf("a file written in the sandbox belongs to %d:%d, not to you (%d:%d)", uid, gid, me, myGID),
			"rootless and user-namespace-remapped engines map the sandbox's ids to other ids on this machine; use a rootful engine (or Docker Desktop)")
		return true
	}
	if !known {
		r.OK("workspace", "the sandbox can write the workspace")
		return true
	}
	r.OK("workspace", "files written in the sandbox belong to you (%d:%d)", me, myGID)
	return true
}

// Copy checks a sandbox that works on a copy of the workspace w: it can
// write its copy, and what it writes does not reach the workspace (looked
// for through w's root). why says why the sandbox holds a copy.
func Copy(ctx context.Context, sb sandbox.Sandbox, w *workspace.Workspace, why string, r sandbox.Report) {
	name := probeName()
	res, err := sb.Run(ctx, sandbox.Command{Shell: ": > " + name + " && rm " + name, Timeout: 30 * time.Second})
	if err != nil || res.ExitCode != 0 {
		r.Fail("workspace", fmt.Sprintf("the sandbox cannot write its copy of the workspace (exit %d, %v)", res.ExitCode, err), "remove the sandbox (`shiro sandbox rm`); the next session makes it again")
		return
	}
	if _, err := w.Root().Lstat(name); err == nil {
		r.Fail("workspace", "copy mode, but a file the sandbox wrote is in the workspace", "remove the sandbox (`shiro sandbox rm`) and report it")
		return
	}
	r.OK("workspace", "a copy in the sandbox (%s): your files change only when you apply its changes (/apply, or --apply with -p); git on this machine never sees what the sandbox does", why)
}
