package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
	"github.com/shiroagent/shiro/internal/hostwrite"
	"github.com/shiroagent/shiro/orchestrator/checkpoint"
	"github.com/shiroagent/shiro/orchestrator/config"
)

// CheckpointsDir is where the checkpoint stores of every workspace live.
func CheckpointsDir(dataDir string) string { return filepath.Join(dataDir, "checkpoints") }

// OpenCheckpoints opens the checkpoint store of the workspace ws (whose
// root is root, and gate its write gate) in the data directory.
func OpenCheckpoints(dataDir, ws string, root *os.Root, gate *hostwrite.Gate) (*checkpoint.Store, error) {
	return checkpoint.Open(filepath.Join(CheckpointsDir(dataDir), config.ProjectKey(ws)), root, gate, checkpoint.Options{})
}

// checkpoints is a session's side of the store: which session and turn
// the checkpoints belong to.
type checkpoints struct {
	store *checkpoint.Store

	mu      sync.Mutex
	session string
	turn    int      // the turn running, 0 between turns
	errs    []string // failures to report at the end of the turn
}

func (c *checkpoints) setSession(id string) {
	c.mu.Lock()
	c.session = id
	c.mu.Unlock()
}

// begin records the checkpoint before a turn and numbers the turn.
func (c *checkpoints) begin(ctx context.Context, history int, prompt string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, err := c.store.List(c.session)
	if err != nil {
		c.errs = append(c.errs, err.Error())
		return
	}
	turns := checkpoint.Turns(list, c.session)
	c.turn = 1
	if n := len(turns); n > 0 {
		c.turn = turns[n-1].Turn + 1
	}
	if _, err := c.store.Record(ctx, checkpoint.Meta{Session: c.session, Turn: c.turn, Kind: checkpoint.KindTurn, History: history, Prompt: clip(prompt, 200)}); err != nil {
		c.errs = append(c.errs, err.Error())
		c.turn = 0
	}
}

// beforeCall records the checkpoint before an approved mutating call.
func (c *checkpoints) beforeCall(ctx context.Context, tool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turn == 0 {
		return
	}
	if _, err := c.store.Record(ctx, checkpoint.Meta{Session: c.session, Turn: c.turn, Kind: checkpoint.KindCall, Tool: tool}); err != nil {
		c.errs = append(c.errs, err.Error())
	}
}

// end records what the turn left and returns the failures of the turn.
func (c *checkpoints) end(ctx context.Context) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turn != 0 {
		if _, err := c.store.Record(context.WithoutCancel(ctx), checkpoint.Meta{Session: c.session, Turn: c.turn, Kind: checkpoint.KindEnd}); err != nil {
			c.errs = append(c.errs, err.Error())
		}
	}
	c.turn = 0
	errs := c.errs
	c.errs = nil
	return errs
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// mayChange reports whether a turn with these tools can change the
// workspace: a gated tool (the write tools, bash, MCP tools) is offered.
func mayChange(offered []agent.Tool) bool {
	for _, t := range offered {
		if agent.IsGated(t) {
			return true
		}
	}
	return false
}

// UndoPlan is what undoing turns would do.
type UndoPlan struct {
	Session string
	// Turn is the first turn undone; Turns counts them.
	Turn, Turns int
	// Prompt starts the first undone turn's prompt; History is the number
	// of messages before it.
	Prompt  string
	History int
	plan    checkpoint.Plan
	// Changes put the workspace back; Tools says which calls of the undone
	// turns made each change.
	Changes []checkpoint.FileChange
	// UserChanged are files among Changes changed after the turns ended:
	// overwritten only after a separate yes.
	UserChanged []string
	// Unrestorable are changed files too large to have been recorded.
	Unrestorable []string
}

// ErrNothingToUndo is the error when the session has no recorded turn.
var ErrNothingToUndo = errors.New("no turn of this session to undo")

// TurnInfo is one recorded turn of a session (`shiro undo --list`).
type TurnInfo struct {
	Turn    int                     `json:"turn"`
	Time    time.Time               `json:"time"`
	Prompt  string                  `json:"prompt"`
	Changes []checkpoint.FileChange `json:"changes"`
	// Ended is false for a turn that was interrupted before it ended
	// (shiro was killed).
	Ended bool `json:"ended"`
}

// ListTurns lists the session's recorded turns with what each changed.
func ListTurns(ctx context.Context, st *checkpoint.Store, session string) ([]TurnInfo, error) {
	list, err := st.List(session)
	if err != nil {
		return nil, err
	}
	var out []TurnInfo
	for _, t := range checkpoint.Turns(list, session) {
		cps := checkpoint.Turn(list, session, t.Turn)
		last := cps[len(cps)-1]
		info := TurnInfo{Turn: t.Turn, Time: t.Time, Prompt: t.Prompt, Ended: last.Kind == checkpoint.KindEnd}
		if info.Changes, err = st.Changes(ctx, t, last); err != nil {
			return nil, err
		}
		st.Attribute(ctx, cps, info.Changes)
		out = append(out, info)
	}
	return out, nil
}

// PlanUndo plans putting the workspace back to before turn (0: the last
// turn) of session.
func PlanUndo(ctx context.Context, st *checkpoint.Store, session string, turn int) (*UndoPlan, error) {
	list, turns, err := sessionTurns(st, session)
	if err != nil {
		return nil, err
	}
	if turn == 0 {
		turn = turns[len(turns)-1].Turn
	}
	var target *checkpoint.Checkpoint
	n := 0
	for i := range turns {
		if turns[i].Turn == turn {
			target = &turns[i]
		}
		if turns[i].Turn >= turn {
			n++
		}
	}
	if target == nil {
		return nil, fmt.Errorf("turn %d of session %s: %w", turn, session, checkpoint.ErrNoCheckpoint)
	}
	// Files changed after the last checkpoint of the last undone turn are
	// the user's.
	lastTurn := turns[len(turns)-1].Turn
	cps := checkpoint.Turn(list, session, lastTurn)
	since := cps[len(cps)-1]
	p, err := st.Plan(ctx, *target, &since)
	if err != nil {
		return nil, err
	}
	up := &UndoPlan{Session: session, Turn: turn, Turns: n, Prompt: target.Prompt, History: target.History, plan: p,
		Changes: p.Changes, UserChanged: p.UserChanged, Unrestorable: p.Unrestorable}
	// Attribute each change to the calls that made it, turn by turn.
	for _, t := range turns {
		if t.Turn >= turn {
			st.Attribute(ctx, checkpoint.Turn(list, session, t.Turn), up.Changes)
		}
	}
	return up, nil
}

// CopyFollower is told what an undo did to files that undone applies had
// written (copy mode keeps the sandbox's version of them pending).
type CopyFollower func(ctx context.Context, applied map[string]bool, done []checkpoint.FileChange) error

// FollowCopies is the CopyFollower of every copy of the workspace ws that
// the data directory keeps, for an undo outside a session.
func FollowCopies(dataDir, ws string, st *checkpoint.Store, root *os.Root) CopyFollower {
	return func(ctx context.Context, applied map[string]bool, done []checkpoint.FileChange) error {
		return rebaseApplies(ctx, st, root, applied, done, copyStateFiles(dataDir, ws))
	}
}

// ApplyUndo carries out the plan; the user's files are overwritten only
// with overwriteUser. It forgets the undone turns' checkpoints (the next
// turn takes the first undone turn's number) and returns the changes made
// and the files left as they were. follow, when set, hears of the files
// undone applies had written.
func ApplyUndo(ctx context.Context, st *checkpoint.Store, p *UndoPlan, overwriteUser bool, follow CopyFollower) (done []checkpoint.FileChange, kept []string, err error) {
	var applied map[string]bool
	if follow != nil {
		if applied, err = appliedPaths(ctx, st, p); err != nil {
			return nil, nil, err
		}
	}
	keep := map[string]bool{}
	if !overwriteUser {
		for _, f := range p.UserChanged {
			keep[f] = true
		}
		kept = p.UserChanged
	}
	done, err = st.Apply(ctx, p.plan, keep)
	if err != nil {
		return nil, nil, err
	}
	if err := st.Forget(p.Session, p.Turn); err != nil {
		return done, kept, err
	}
	if follow != nil && len(applied) > 0 {
		if err := follow(ctx, applied, done); err != nil {
			return done, kept, fmt.Errorf("the undo is done, but the sandbox's copy may take it for your edit: %w", err)
		}
	}
	return done, kept, nil
}

// Rewind cuts the conversation back to before the plan's first undone
// turn. ok is false when the history no longer has that turn where it was
// (compacted or cleared since): it is then left as it is.
func Rewind(msgs []llm.Message, p *UndoPlan) ([]llm.Message, bool) {
	if p.History < 0 || p.History >= len(msgs) {
		return msgs, false
	}
	m := msgs[p.History]
	if m.Role != llm.RoleUser {
		return msgs, false
	}
	text := ""
	for _, part := range m.Parts {
		if part.Type == llm.PartText {
			text += part.Text
		}
	}
	if p.Prompt != "" && !strings.HasPrefix(clip(text, 200), strings.TrimSuffix(p.Prompt, "...")) {
		return msgs, false
	}
	return append([]llm.Message(nil), msgs[:p.History]...), true
}

// SetSessionID names the session the next checkpoints belong to (after
// /clear or /resume switched records).
func (s *Session) SetSessionID(id string) {
	if s.cp != nil {
		s.cp.setSession(id)
	}
}

// Checkpoints is the session's checkpoint store, nil when checkpoints are
// off.
func (s *Session) Checkpoints() *checkpoint.Store {
	if s.cp == nil {
		return nil
	}
	return s.cp.store
}

// sessionID is the session the checkpoints belong to.
func (s *Session) sessionID() string {
	s.cp.mu.Lock()
	defer s.cp.mu.Unlock()
	return s.cp.session
}

// ErrNoCheckpoints is the error of /undo and /diff with checkpoints off.
var ErrNoCheckpoints = errors.New("checkpoints are off for this session")

// PlanUndo plans undoing the last n turns (n >= 1).
func (s *Session) PlanUndo(ctx context.Context, n int) (*UndoPlan, error) {
	if s.cp == nil {
		return nil, ErrNoCheckpoints
	}
	if err := s.jobsRunning(); err != nil {
		return nil, err
	}
	id := s.sessionID()
	list, err := s.cp.store.List(id)
	if err != nil {
		return nil, err
	}
	turns := checkpoint.Turns(list, id)
	if len(turns) == 0 {
		return nil, ErrNothingToUndo
	}
	if n < 1 {
		n = 1
	}
	if n > len(turns) {
		return nil, fmt.Errorf("only %d turn(s) of this session can be undone", len(turns))
	}
	return PlanUndo(ctx, s.cp.store, id, turns[len(turns)-n].Turn)
}

// Undo carries out the plan and rewinds the conversation to before its
// first turn. rewound is false when the history no longer holds that turn
// where it was (compacted): the conversation is then left as it is.
func (s *Session) Undo(ctx context.Context, p *UndoPlan, overwriteUser bool) (done []checkpoint.FileChange, kept []string, rewound bool, err error) {
	if s.cp == nil {
		return nil, nil, false, ErrNoCheckpoints
	}
	if err := s.jobsRunning(); err != nil {
		return nil, nil, false, err
	}
	var follow CopyFollower
	if s.copy != nil {
		follow = s.copy.rebase
	}
	done, kept, err = ApplyUndo(ctx, s.cp.store, p, overwriteUser, follow)
	if err != nil {
		return done, kept, false, err
	}
	msgs, ok := Rewind(s.agent.Messages(), p)
	if ok {
		s.agent.Replace(msgs)
		s.book.save(msgs, true)
		s.publish(HistoryEvent{msgs})
	}
	return done, kept, ok, nil
}

// FileDiff is one changed file with its patch (/diff).
type FileDiff struct {
	checkpoint.FileChange
	Patch string
}

// Diff shows the changes of turn (or, with turn 0, of the whole session
// up to now) without undoing anything.
func (s *Session) Diff(ctx context.Context, turn int) ([]FileDiff, error) {
	if s.cp == nil {
		return nil, ErrNoCheckpoints
	}
	return DiffTurns(ctx, s.cp.store, s.sessionID(), turn)
}

// DiffTurns is the diff of a turn of session (turn 0: from before its
// first recorded turn to the workspace now).
func DiffTurns(ctx context.Context, st *checkpoint.Store, session string, turn int) ([]FileDiff, error) {
	list, turns, err := sessionTurns(st, session)
	if err != nil {
		return nil, err
	}
	var chs []checkpoint.FileChange
	if turn == 0 {
		now, err := st.Current(ctx)
		if err != nil {
			return nil, err
		}
		if chs, err = st.Since(ctx, turns[0], now); err != nil {
			return nil, err
		}
		for _, t := range turns {
			st.Attribute(ctx, checkpoint.Turn(list, session, t.Turn), chs)
		}
	} else {
		cps := checkpoint.Turn(list, session, turn)
		if len(cps) == 0 {
			return nil, fmt.Errorf("turn %d: %w", turn, checkpoint.ErrNoCheckpoint)
		}
		end := cps[len(cps)-1]
		if end.Kind != checkpoint.KindEnd {
			// The turn did not end (it runs, or shiro was killed): up to now.
			now, err := st.Current(ctx)
			if err != nil {
				return nil, err
			}
			if chs, err = st.Since(ctx, cps[0], now); err != nil {
				return nil, err
			}
		} else if chs, err = st.Changes(ctx, cps[0], end); err != nil {
			return nil, err
		}
		st.Attribute(ctx, cps, chs)
	}
	out := make([]FileDiff, len(chs))
	for i, c := range chs {
		patch, err := st.Patch(ctx, c)
		if err != nil {
			return nil, err
		}
		out[i] = FileDiff{FileChange: c, Patch: patch}
	}
	return out, nil
}

// sessionTurns lists session's checkpoints and the turns among them;
// ErrNothingToUndo when it has no turn.
func sessionTurns(st *checkpoint.Store, session string) (list, turns []checkpoint.Checkpoint, err error) {
	list, err = st.List(session)
	if err != nil {
		return nil, nil, err
	}
	turns = checkpoint.Turns(list, session)
	if len(turns) == 0 {
		return nil, nil, ErrNothingToUndo
	}
	return list, turns, nil
}
