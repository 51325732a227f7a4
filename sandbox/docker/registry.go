package docker

import (
	"os"
	"path/filepath"
	"strings"
)

// registry remembers, in the user's data directory, the containers (by
// id) and volumes (by name) this user's shiro made. The
// owner label filters; the registry decides: a container or volume that
// copies every label of one of shiro's, name included, is still not in it.
type registry struct{ dir string }

func (r registry) path(kind, name string) string {
	return filepath.Join(r.dir, kind+"-"+strings.ReplaceAll(name, "/", "_"))
}

func (r registry) add(kind, name, value string) {
	if os.MkdirAll(r.dir, 0o700) != nil {
		return
	}
	_ = os.WriteFile(r.path(kind, name), []byte(value), 0o600)
}

func (r registry) get(kind, name string) (string, bool) {
	b, err := os.ReadFile(r.path(kind, name))
	return string(b), err == nil
}

func (r registry) remove(kind, name string) { _ = os.Remove(r.path(kind, name)) }

func (r registry) addContainer(id string)      { r.add("c", id, "") }
func (r registry) hasContainer(id string) bool { _, ok := r.get("c", id); return ok }
func (r registry) removeContainer(id string)   { r.remove("c", id) }
func (r registry) addVolume(name string)       { r.add("v", name, "") }
func (r registry) hasVolume(name string) bool  { _, ok := r.get("v", name); return ok }
func (r registry) removeVolume(name string)    { r.remove("v", name) }
