package docker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
)

// EngineInfo describes the engine, for `shiro doctor`.
type EngineInfo struct {
	// Host is the address in use (DOCKER_HOST or the default socket).
	Host string
	// ServerVersion is the engine's version ("20.10.24").
	ServerVersion string
	// APIVersion is the API version negotiated with it ("1.41").
	APIVersion string
	OS         string
	// Rootless is set when the engine runs without root (its security
	// options say name=rootless): the uids in the container map to
	// subordinate ids on the host.
	Rootless bool
	// UserNS is set when the engine remaps user namespaces.
	UserNS bool
	// Memory is the memory the engine's host has, in bytes.
	Memory int64
}

// Info asks the engine what it is.
func (e *Engine) Info(ctx context.Context) (EngineInfo, error) {
	res, err := e.api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return EngineInfo{}, fmt.Errorf("engine info: %w", err)
	}
	info := EngineInfo{
		Host:          e.host,
		ServerVersion: res.Info.ServerVersion,
		APIVersion:    e.api.ClientVersion(),
		OS:            res.Info.OperatingSystem,
		Memory:        res.Info.MemTotal,
	}
	for _, opt := range res.Info.SecurityOptions {
		switch {
		case strings.Contains(opt, "name=rootless"):
			info.Rootless = true
		case strings.Contains(opt, "name=userns"):
			info.UserNS = true
		}
	}
	return info, nil
}

// ImageDescription says what an image is and where it came from.
type ImageDescription struct {
	Ref string
	ID  string
	// Digest is the image exactly (Info.ImageDigest): the registry's
	// digest of a pulled image, else its id.
	Digest  string
	Created time.Time
	// Builtin is set for the default image (images.Tag()).
	Builtin bool
	// Offline is set for a default image made with debootstrap.
	Offline bool
	// Managed is set when shiro built it.
	Managed bool
	// Source is the Dockerfile or devcontainer.json a project image was
	// built from.
	Source string
}

// DescribeImage inspects a local image.
func (e *Engine) DescribeImage(ctx context.Context, ref string) (ImageDescription, error) {
	img, err := e.api.ImageInspect(ctx, ref)
	if err != nil {
		return ImageDescription{}, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	d := ImageDescription{Ref: ref, ID: img.ID, Digest: imageDigest(ref, img.ID, img.RepoDigests), Builtin: ref == images.Tag()}
	d.Created, _ = time.Parse(time.RFC3339Nano, img.Created)
	d.Offline = strings.Contains(img.Comment, "debootstrap")
	if img.Config != nil {
		l := img.Config.Labels
		d.Managed = l[LabelBuilt] == "true" || l[LabelManaged] == "true" // images built before LabelBuilt
		d.Source = l[LabelSource]
	}
	return d, nil
}

// String is the description `shiro doctor` prints.
func (d ImageDescription) String() string {
	var from string
	switch {
	case d.Builtin && d.Offline:
		from = "the built-in image (made offline from Debian packages)"
	case d.Builtin:
		from = "the built-in image (images/default/Dockerfile)"
	case d.Source != "":
		from = "built by shiro from " + d.Source
	case d.Managed:
		from = "built by shiro"
	default:
		from = "a local image shiro did not build"
	}
	id := strings.TrimPrefix(d.ID, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	out := fmt.Sprintf("%s (%s), %s", d.Ref, id, from)
	if d.Digest != "" && d.Digest != d.ID {
		// A registry's digest is what a project pins: ref@digest.
		out += ", digest " + d.Digest
	}
	return out
}
