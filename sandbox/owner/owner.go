// Package owner marks what shiro makes in a sandbox engine (Docker
// containers and volumes, Kubernetes pods, claims and config maps) as this
// user's: a key kept in the user's data directory, a token over an object's
// kind, name and settings that only that key yields, and the identity of
// the workspace directory an object belongs to. Listing, reuse, sweeps and
// prune touch nothing whose token does not check, so an object someone
// else made under shiro's name or labels is never adopted or deleted.
package owner

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/shiroagent/shiro/internal/workspace"
)

// Label is the label (on Docker objects) or label key (on Kubernetes
// objects) that carries the token.
const Label = "dev.shiro.owner"

// keyFile holds the key, 32 random bytes in hex, mode 0600.
const keyFile = "owner.key"

// LoadKey reads the key under dir, making it the first time.
func LoadKey(dir string) ([]byte, error) {
	p := filepath.Join(dir, keyFile)
	if b, err := os.ReadFile(p); err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) < 16 {
			return nil, fmt.Errorf("%s is not a key shiro made; remove it to make a new one (shiro then no longer recognises its existing sandboxes)", p)
		}
		return key, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the sandbox owner key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s: %w", dir, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// Written beside and linked into place: a racing shiro sees the whole
	// key or none.
	tmp := p + ".tmp-" + suffix()
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the sandbox owner key: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) { // another shiro made it first
			return LoadKey(dir)
		}
		return nil, fmt.Errorf("write the sandbox owner key: %w", err)
	}
	return key, nil
}

// Token binds an object's kind, name, workspace and settings to the key.
func Token(key []byte, kind, name, workspace, config string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%s", kind, name, workspace, config)
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// Valid reports whether token is Token's for the same arguments, in
// constant time.
func Valid(key []byte, token, kind, name, workspace, config string) bool {
	return hmac.Equal([]byte(token), []byte(Token(key, kind, name, workspace, config)))
}

// DefaultStateDir is where shiro keeps sandbox state when the caller names
// no directory: $SHIRO_HOME/sandbox, else $XDG_DATA_HOME/shiro/sandbox,
// else ~/.local/share/shiro/sandbox (as orchestrator/config resolves the
// data directory).
func DefaultStateDir() (string, error) {
	if h := os.Getenv("SHIRO_HOME"); h != "" {
		abs, err := filepath.Abs(h)
		return filepath.Join(abs, "sandbox"), err
	}
	if x := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "shiro", "sandbox"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the data directory for the sandbox's state: %w (set SHIRO_HOME)", err)
	}
	return filepath.Join(home, ".local", "share", "shiro", "sandbox"), nil
}

// WorkspaceID names a workspace directory as an object, not only a path: a
// repository removed and made again at the same path is a new directory
// (another inode, another birth time) and gets a fresh HOME
// (workspace.PathID; a run's open workspace has it as Workspace.ID).
func WorkspaceID(ws string) (string, error) { return workspace.PathID(ws) }

// WorkspaceKey is a short stable hash of the workspace path.
func WorkspaceKey(ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return hex.EncodeToString(sum[:])[:10]
}

// WorkspaceVolumeKey keys the storage of one workspace directory (its path
// and WorkspaceID).
func WorkspaceVolumeKey(ws, id string) string {
	sum := sha256.Sum256([]byte(ws + "\x00" + id))
	return hex.EncodeToString(sum[:])[:12]
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
