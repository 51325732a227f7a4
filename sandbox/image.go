package sandbox

import (
	"path/filepath"
	"strings"
)

// DevcontainerWord, as an image setting, means the workspace's
// .devcontainer/devcontainer.json (or .devcontainer.json).
const DevcontainerWord = "devcontainer"

// ImageKind says what an image setting (Settings.Image) names.
type ImageKind string

// The three forms of an image setting.
const (
	KindReference    ImageKind = "image"
	KindDockerfile   ImageKind = "dockerfile"
	KindDevcontainer ImageKind = "devcontainer"
)

// ClassifyImage says what an image setting names, and the reference or
// path. A path starts with /, ./, ../ or ~/, or its file name is a
// Dockerfile's (Dockerfile, Dockerfile.*, *.Dockerfile, Containerfile) or
// ends in .json; DevcontainerWord is the workspace's devcontainer.json;
// anything else is an image reference.
func ClassifyImage(spec string) (ImageKind, string) {
	spec = strings.TrimSpace(spec)
	if spec == DevcontainerWord {
		return KindDevcontainer, spec
	}
	base := filepath.Base(spec)
	switch {
	case strings.HasSuffix(base, ".json"):
		return KindDevcontainer, spec
	case base == "Dockerfile", base == "Containerfile", strings.HasPrefix(base, "Dockerfile."),
		strings.HasSuffix(base, ".Dockerfile"), strings.HasSuffix(base, ".dockerfile"), strings.HasPrefix(base, "Containerfile."):
		return KindDockerfile, spec
	}
	for _, prefix := range []string{"/", "./", "../", "~/"} {
		if strings.HasPrefix(spec, prefix) {
			return KindDockerfile, spec
		}
	}
	return KindReference, spec
}
