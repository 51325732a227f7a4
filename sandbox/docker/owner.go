package docker

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
)

// LabelOwner carries a token only this user's shiro can compute: an HMAC,
// under a key kept in the user's data directory, of the container's (or
// volume's) name and settings. Listing, reuse, the start-up sweep and
// prune touch nothing without a valid one, so a container someone else
// made under shiro's name or labels, or one inheriting labels from an
// image, is never adopted or deleted.
const LabelOwner = "dev.shiro.owner"

// ownerKeyFile holds the key, 32 random bytes in hex, mode 0600.
const ownerKeyFile = "owner.key"

// loadOwnerKey reads the key under dir, making it the first time.
func loadOwnerKey(dir string) ([]byte, error) {
	p := filepath.Join(dir, ownerKeyFile)
	if b, err := os.ReadFile(p); err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) < 16 {
			return nil, fmt.Errorf("%s is not a key shiro made; remove it to make a new one (shiro then no longer recognises its existing containers)", p)
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
	tmp := p + ".tmp-" + randomSuffix()
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the sandbox owner key: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) { // another shiro made it first
			return loadOwnerKey(dir)
		}
		return nil, fmt.Errorf("write the sandbox owner key: %w", err)
	}
	return key, nil
}

// ownerToken binds a name and its settings to the key.
func ownerToken(key []byte, kind, name, workspace, config string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%s", kind, name, workspace, config)
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// ownsContainer checks a container's labels and name against the key,
// and its id against the registry of what this user's shiro made.
func (e *Engine) ownsContainer(id, name string, labels map[string]string) bool {
	if !ours(labels) {
		return false
	}
	want := ownerToken(e.ownerKey, "container", strings.TrimPrefix(name, "/"), labels[LabelWorkspace], labels[LabelConfig])
	return hmac.Equal([]byte(labels[LabelOwner]), []byte(want)) && e.reg.hasContainer(id)
}

// ownsVolume checks a volume's labels and name against the key, and its
// name against the registry. (A volume has no identity the engine assigns
// and keeps: its reported creation time moves as it is written. Whoever
// could replace one of shiro's volumes with a copy could write into the
// original as well.)
func (e *Engine) ownsVolume(name string, labels map[string]string) bool {
	if labels[LabelManaged] != "true" || labels[LabelWorkspace] == "" {
		return false
	}
	want := ownerToken(e.ownerKey, "volume", name, labels[LabelWorkspace], "")
	if !hmac.Equal([]byte(labels[LabelOwner]), []byte(want)) {
		return false
	}
	return e.reg.hasVolume(name)
}

// defaultStateDir is where shiro keeps sandbox state when the caller names
// no directory: $SHIRO_HOME/sandbox, else $XDG_DATA_HOME/shiro/sandbox,
// else ~/.local/share/shiro/sandbox (as orchestrator/config resolves the
// data directory).
func defaultStateDir() (string, error) {
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
