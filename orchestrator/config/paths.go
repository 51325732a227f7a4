package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Paths are where shiro keeps its state on the host.
type Paths struct {
	// ConfigDir holds config.json.
	ConfigDir string
	// DataDir holds sessions and, later, per-project memory and history.
	DataDir string
}

// ResolvePaths finds the state directories from the environment (nil
// getenv means os.LookupEnv). SHIRO_HOME relocates everything: config at
// $SHIRO_HOME/config.json, data under $SHIRO_HOME. Otherwise the XDG base
// directories apply: $XDG_CONFIG_HOME/shiro (default ~/.config/shiro) and
// $XDG_DATA_HOME/shiro (default ~/.local/share/shiro). Relative XDG values
// are ignored, as the XDG specification asks.
func ResolvePaths(getenv func(string) (string, bool)) (Paths, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	if h, ok := getenv("SHIRO_HOME"); ok && h != "" {
		abs, err := filepath.Abs(h)
		if err != nil {
			return Paths{}, fmt.Errorf("resolve SHIRO_HOME: %w", err)
		}
		return Paths{ConfigDir: abs, DataDir: abs}, nil
	}
	base := func(xdg, fallback string) (string, error) {
		if v, ok := getenv(xdg); ok && filepath.IsAbs(v) {
			return filepath.Join(v, "shiro"), nil
		}
		home, ok := getenv("HOME")
		if !ok || !filepath.IsAbs(home) {
			return "", errors.New("resolve state directories: HOME is not set (set SHIRO_HOME instead)")
		}
		return filepath.Join(home, fallback, "shiro"), nil
	}
	cfg, err := base("XDG_CONFIG_HOME", ".config")
	if err != nil {
		return Paths{}, err
	}
	data, err := base("XDG_DATA_HOME", filepath.Join(".local", "share"))
	if err != nil {
		return Paths{}, err
	}
	return Paths{ConfigDir: cfg, DataDir: data}, nil
}

// ConfigFile is the user's config.json.
func (p Paths) ConfigFile() string { return filepath.Join(p.ConfigDir, "config.json") }

// SessionsDir holds one JSON record per session.
func (p Paths) SessionsDir() string { return filepath.Join(p.DataDir, "sessions") }

// ProjectConfigFile is a workspace's own config file (untrusted).
func ProjectConfigFile(workspace string) string {
	return filepath.Join(workspace, ".shiro", "config.json")
}

// ProjectKey names a project's per-project files (memory, prompt history):
// the first 16 hex digits of the SHA-256 of its absolute path. Moving a
// project changes its key.
func ProjectKey(absPath string) string {
	sum := sha256.Sum256([]byte(absPath))
	return hex.EncodeToString(sum[:8])
}
