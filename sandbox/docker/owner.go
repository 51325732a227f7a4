package docker

import (
	"crypto/hmac"
	"strings"

	"github.com/shiroagent/shiro/sandbox/owner"
)

// LabelOwner carries a token only this user's shiro can compute: an HMAC,
// under a key kept in the user's data directory, of the container's (or
// volume's) name and settings. Listing, reuse, the start-up sweep and
// prune touch nothing without a valid one, so a container someone else
// made under shiro's name or labels, or one inheriting labels from an
// image, is never adopted or deleted.
const LabelOwner = owner.Label

// loadOwnerKey reads the key under dir, making it the first time.
func loadOwnerKey(dir string) ([]byte, error) { return owner.LoadKey(dir) }

// ownerToken binds a name and its settings to the key.
func ownerToken(key []byte, kind, name, workspace, config string) string {
	return owner.Token(key, kind, name, workspace, config)
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
// no directory (owner.DefaultStateDir).
func defaultStateDir() (string, error) { return owner.DefaultStateDir() }
