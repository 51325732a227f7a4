package sandbox

import (
	"context"
	"io"
)

// ImagePull asks a backend to pull an image reference, with the registry's
// credentials from the docker config file.
type ImagePull struct {
	Ref      string
	Progress io.Writer
}

// ImagePuller is a Backend that pulls images itself, for `shiro image
// pull` (a cluster's nodes pull theirs, with the pod's pull secret).
type ImagePuller interface {
	// PullImage pulls the reference and returns the image's id.
	PullImage(context.Context, ImagePull) (string, error)
}
