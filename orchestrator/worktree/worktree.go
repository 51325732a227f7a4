// Package worktree keeps shiro's worktree agents: linked worktrees of the
// user's repository, each on its own branch shiro/NAME, in a folder of
// shiro's data directory outside the user's checkout, each run with its
// own sandbox.
//
// Everything here runs git on the host, so every git call goes through
// Git, which turns off what a repository can make git run by itself
// (hooks, the fsmonitor daemon) and never prompts.
package worktree

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// BranchPrefix is the prefix of every agent's branch.
const BranchPrefix = "shiro/"

// Layout is where a repository's agents live.
type Layout struct {
	// Root holds one directory per agent, the agent's worktree:
	// <data>/worktrees/<repo key>/<NAME>. Only an agent's own directory is
	// its sandbox's workspace; nothing else under Root is mounted.
	Root string
	// State holds shiro's records of the agents (never mounted in a
	// sandbox): <data>/agents/<repo key>.
	State string
}

// LayoutFor is the layout of the repository whose common git directory is
// commonDir, under shiro's data directory (worktreeDir, when set, is the
// configured folder for the worktrees instead of <data>/worktrees).
func LayoutFor(dataDir, worktreeDir, commonDir string) Layout {
	key := RepoKey(commonDir)
	if worktreeDir == "" {
		worktreeDir = filepath.Join(dataDir, "worktrees")
	}
	return Layout{Root: filepath.Join(worktreeDir, key), State: filepath.Join(dataDir, "agents", key)}
}

// RepoKey names a repository by its common git directory: the name of the
// directory holding it (for people reading the folder) and a hash of its
// absolute path.
func RepoKey(commonDir string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(commonDir)))
	base := filepath.Base(filepath.Dir(filepath.Clean(commonDir)))
	if filepath.Base(commonDir) != ".git" {
		base = strings.TrimSuffix(filepath.Base(commonDir), ".git")
	}
	base = unsafeChars.ReplaceAllString(base, "_")
	if base == "" || base == "." || base == "_" {
		base = "repo"
	}
	return base + "-" + hex.EncodeToString(sum[:6])
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// validName is an agent's name: a single ref component git accepts, that
// is also a plain directory name.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName says why name cannot name an agent (nil when it can).
func CheckName(name string) error {
	if !validName.MatchString(name) || strings.Contains(name, "..") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") {
		return fmt.Errorf("%q cannot name a worktree agent: use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or digit)", name)
	}
	return nil
}

// Path is the worktree of the agent name.
func (l Layout) Path(name string) string { return filepath.Join(l.Root, name) }

// Branch is the branch of the agent name.
func Branch(name string) string { return BranchPrefix + name }

// gitSafety turns off what a repository's files can make git run on its
// own: the fsmonitor daemon and hooks. (Clean, smudge and merge drivers
// are defined only in configuration, which a sandbox cannot write; a
// workspace's .gitattributes can only name one the user defined.)
var gitSafety = []string{"-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"}

// gitEnv keeps git from prompting or paging, and its messages in English.
var gitEnv = []string{"GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "PAGER=cat", "LC_ALL=C"}

// Git runs git on the host in dir with the safety options, and returns its
// trimmed stdout; a failure's error carries git's stderr.
func Git(ctx context.Context, dir string, args ...string) (string, error) {
	argv := append(append([]string{"-C", dir}, gitSafety...), args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	cmd.Env = append(cmd.Environ(), gitEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return strings.TrimSpace(stdout.String()), fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}
