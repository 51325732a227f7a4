package worktree

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/internal/flock"
)

// Agent is shiro's record of one worktree agent, kept in Layout.State as
// NAME.json (never in the worktree: the sandbox writes there).
type Agent struct {
	Name   string `json:"name"`
	Branch string `json:"branch"`
	// Path is the agent's worktree: its session's workspace.
	Path string `json:"path"`
	// Checkout is the top of the user's checkout the agent was made from;
	// CommonDir the repository's common git directory.
	Checkout  string `json:"checkout"`
	CommonDir string `json:"commonDir"`
	// Base is the commit the branch was made at.
	Base    string    `json:"base"`
	Created time.Time `json:"created"`
}

func (l Layout) recordPath(name string) string { return filepath.Join(l.State, name+".json") }
func (l Layout) lockPath(name string) string   { return filepath.Join(l.State, name+".lock") }

// ErrNoAgent is Load's error for a name with no record.
var ErrNoAgent = errors.New("no such worktree agent")

// Load reads the record of the agent name.
func (l Layout) Load(name string) (*Agent, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(l.recordPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", name, ErrNoAgent)
	}
	if err != nil {
		return nil, err
	}
	var a Agent
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("read the record of worktree agent %s: %w", name, err)
	}
	return &a, nil
}

// Save writes the agent's record atomically.
func (l Layout) Save(a *Agent) error {
	if err := os.MkdirAll(l.State, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(l.recordPath(a.Name), append(b, '\n'), 0o600)
}

// Hold marks the agent name as running until the returned function is
// called (an flock: a process that dies lets go of it). It fails when
// another session holds it.
func (l Layout) Hold(name string) (func(), error) {
	unlock, err := flock.TryLock(l.lockPath(name))
	if errors.Is(err, flock.ErrHeld) {
		return nil, fmt.Errorf("the worktree agent %s is running in another shiro", name)
	}
	return unlock, err
}

// Running reports whether a session holds the agent name.
func (l Layout) Running(name string) bool { return flock.Held(l.lockPath(name)) }
