package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/shiroagent/shiro/internal/atomicfile"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/sandbox/egress"
)

// projectRules are the answers "always for this project" and "always deny"
// given for one workspace, kept in the user's data directory (never in the
// workspace, which the sandbox can write).
type projectRules struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// projectRulesFile is where the answers for ws are kept.
func projectRulesFile(dataDir, ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(dataDir, "network", hex.EncodeToString(sum[:])[:16]+".json")
}

// rulesStore reads and updates one workspace's answers.
type rulesStore struct {
	mu   sync.Mutex
	file string
}

func (s *rulesStore) load() (projectRules, error) {
	var r projectRules
	data, err := os.ReadFile(s.file)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("%s: %w", s.file, err)
	}
	return r, nil
}

func (s *rulesStore) add(r egress.Rule, allow bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.load()
	if err != nil {
		return err
	}
	list := &cur.Deny
	if allow {
		list = &cur.Allow
	}
	if slices.Contains(*list, r.Pattern) {
		return nil
	}
	*list = append(*list, r.Pattern)
	data, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.file), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(s.file, append(data, '\n'), 0o600)
}

// newEgress builds the egress proxy of a session in ask mode from the
// configured rules, the project's remembered answers and the host's own
// addresses.
func newEgress(cfg SandboxConfig) (*egress.Proxy, error) {
	pol := egress.Policy{HostAddrs: egress.LocalAddrs()}
	conv := func(rs []config.HostRule) []egress.Rule {
		out := make([]egress.Rule, 0, len(rs))
		for _, r := range rs {
			out = append(out, egress.Rule{Pattern: r.Pattern, Source: r.Source})
		}
		return out
	}
	pol.Allow, pol.Deny = conv(cfg.HostRules.Allow), conv(cfg.HostRules.Deny)
	var store *rulesStore
	if cfg.DataDir != "" {
		store = &rulesStore{file: projectRulesFile(cfg.DataDir, cfg.Workspace)}
		saved, err := store.load()
		if err != nil {
			return nil, fmt.Errorf("read this project's network answers: %w", err)
		}
		for _, p := range saved.Deny {
			if c, err := egress.ParsePattern(p); err == nil {
				pol.Deny = append(pol.Deny, egress.Rule{Pattern: c, Source: "always denied for this project"})
			}
		}
		for _, p := range saved.Allow {
			if c, err := egress.ParsePattern(p); err == nil {
				pol.Allow = append(pol.Allow, egress.Rule{Pattern: c, Source: "always for this project"})
			}
		}
	}
	ec := egress.Config{Policy: pol, OnRecord: cfg.onConnection}
	if creds := cfg.HostRules.Credentials; len(creds) > 0 {
		ca, err := workspaceCA(cfg.DataDir, cfg.Workspace)
		if err != nil {
			return nil, fmt.Errorf("make the CA for network.credentials: %w", err)
		}
		ec.Credentials, ec.CA = egressCredentials(creds), ca
	}
	if cfg.askHost != nil {
		ec.Ask = cfg.askHost
	}
	if store != nil {
		ec.Remember = store.add
	}
	return egress.New(ec), nil
}

// AskHostFunc asks the user about a connection no rule decides.
type AskHostFunc = func(ctx context.Context, r egress.Request) egress.Answer
