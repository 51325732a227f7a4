package helper

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
)

// A reaper is a small process between a Runner and the commands it starts:
// it makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every
// process a command starts stays in its subtree whatever it does to its
// session, group or environment, and it kills that whole subtree on request.
// The Runner talks to its reapers over a socket pair, one JSON object per
// line; a start request carries the command's stdout, stderr and stdin as
// file descriptors (SCM_RIGHTS).
//
//	runner → reaper  start {id, path, args, env, dir[, files]}
//	                                                     + 3 fds (files: 4)
//	                 kill  {id}                          kill the command's subtree
//	                 EOF                                 kill the subtree, exit
//	reaper → runner  started {id, pid} | failed {id, errno, error}
//	                 exit    {id, status, idle}          the main process ended
//	                 idle    {id}                        its last descendant ended
//
// A reaper runs one command at a time and is reused once the command's
// subtree is empty (idle): starting a reaper means starting the shiro binary,
// which costs tens of milliseconds.
const (
	reapStart   = "start"
	reapKill    = "kill"
	reapStarted = "started"
	reapFailed  = "failed"
	reapExit    = "exit"
	reapIdle    = "idle"
)

// reapMsg is one message between a Runner and a reaper.
type reapMsg struct {
	Op string `json:"op"`
	ID uint64 `json:"id"`

	// start
	Path string   `json:"path,omitempty"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`

	// started, failed
	Pid   int    `json:"pid,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Error string `json:"error,omitempty"`

	// exit
	Status uint32 `json:"status,omitempty"` // the wait status
	Idle   bool   `json:"idle,omitempty"`
}

// reapFiles is how many descriptors a start request carries: stdin,
// stdout, stderr.
const reapFiles = 3

// ReapOptions configures Reap.
type ReapOptions struct {
	// SessionID is the session the reaper serves; it only appears on the
	// reaper's command line, where a kill from outside finds it.
	SessionID string
	// OOMScoreAdj, when non-zero, is written to the oom_score_adj of each
	// command the reaper starts, as it starts it.
	OOMScoreAdj int
}

// args returns the flags that carry o on a reaper's command line.
func (o ReapOptions) args() []string {
	args := []string{"--session", o.SessionID}
	if o.OOMScoreAdj != 0 {
		args = append(args, "--oom-score-adj", strconv.Itoa(o.OOMScoreAdj))
	}
	return args
}

// ReapFD is the descriptor on which a reaper finds its Runner's socket.
const ReapFD = 3

// shiroMains are the import paths of the programs that carry the helper's
// command line: shiro and the small shiro-helper.
var shiroMains = []string{"github.com/shiroagent/shiro/cmd/shiro", "github.com/shiroagent/shiro/cmd/shiro-helper"}

// DefaultReaper is the reaper command line a Runner uses unless WithReaper
// says otherwise: shiro's own `helper reap` when the running program is
// shiro, else nil (no reaper: commands start directly, and a kill reaches
// their process group and the processes that kept their marker).
func DefaultReaper() []string {
	if bi, ok := debug.ReadBuildInfo(); ok && slices.Contains(shiroMains, bi.Path) {
		return []string{selfPath(), "helper", "reap"}
	}
	return nil
}

// selfPath is the running program's path, resolved now: once a serve
// process is made non-dumpable, a normal user can no longer execute it
// through /proc/self/exe.
func selfPath() string {
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return "/proc/self/exe"
}

// reapMainArg is the first argument that makes ReapMain run the reaper.
const reapMainArg = "-shiro.helper.reap"

// SelfReaper is the reaper command line that restarts the running program
// as a reaper, for a program whose main function (a test binary's TestMain)
// calls ReapMain first.
func SelfReaper() []string { return []string{selfPath(), reapMainArg} }

// ReapMain runs the reaper and returns its exit code when the program was
// started as SelfReaper; ok is false otherwise and nothing happened.
func ReapMain() (code int, ok bool) {
	if len(os.Args) < 2 || os.Args[1] != reapMainArg {
		return 0, false
	}
	opts, err := parseReapArgs(os.Args[2:])
	if err == nil {
		err = Reap(os.NewFile(ReapFD, "reaper"), opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shiro reaper:", err)
		return 1, true
	}
	return 0, true
}

// parseReapArgs reads the flags ReapOptions.args writes.
func parseReapArgs(args []string) (ReapOptions, error) {
	var o ReapOptions
	for len(args) > 0 {
		if len(args) < 2 {
			return o, fmt.Errorf("reaper: flag %s needs a value", args[0])
		}
		switch args[0] {
		case "--session":
			o.SessionID = args[1]
		case "--oom-score-adj":
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return o, fmt.Errorf("reaper: --oom-score-adj: %w", err)
			}
			o.OOMScoreAdj = n
		default:
			return o, fmt.Errorf("reaper: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	return o, nil
}

// errReaperDied is a command's wait error when its reaper ended before
// reporting how the command ended (something killed it).
var errReaperDied = errors.New("the command's reaper ended unexpectedly")
