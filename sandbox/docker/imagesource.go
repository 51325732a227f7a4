package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/internal/confine"
	"github.com/shiroagent/shiro/sandbox"
)

// LabelSource is put on the images shiro builds from a project's
// Dockerfile or devcontainer.json: the file's path. (The classic builder
// turns each label into a step of its own, so there are only two labels:
// this one and LabelBuilt; the tag holds the context's hash.)
const LabelSource = "dev.shiro.source"

// ProjectImageRepo is the repository of the images shiro builds for
// projects; the tag is a hash of the build context.
const ProjectImageRepo = "shiro-project"

// BaseImageArg is the build argument that holds the default image's tag, so
// a Dockerfile can extend it whatever shiro's version:
//
//	ARG SHIRO_BASE_IMAGE
//	FROM ${SHIRO_BASE_IMAGE}
const BaseImageArg = "SHIRO_BASE_IMAGE"

// DevcontainerWord, as an image, means the workspace's
// .devcontainer/devcontainer.json (or .devcontainer.json).
const DevcontainerWord = sandbox.DevcontainerWord

// ImageKind says what an image setting names (sandbox.ImageKind).
type ImageKind = sandbox.ImageKind

// The three forms of an image setting.
const (
	KindReference    = sandbox.KindReference
	KindDockerfile   = sandbox.KindDockerfile
	KindDevcontainer = sandbox.KindDevcontainer
)

var (
	// ErrOutsideWorkspace is returned when a path that must stay inside the
	// workspace (the project's configuration chose it, or a
	// devcontainer.json inside the workspace names it) leaves it.
	ErrOutsideWorkspace = errors.New("outside the workspace")
)

// ImageRequest says which image a sandbox runs.
type ImageRequest struct {
	// Spec is an image reference, a path to a Dockerfile, a path to a
	// devcontainer.json, or DevcontainerWord. Relative paths are relative to
	// the workspace.
	Spec string
	// Workspace is the absolute workspace path.
	Workspace string
	// Root is the workspace, open (workspace.Workspace.Root): every file
	// of it that Spec names is read through Root. A build shared with
	// other callers may open its context through Root until it ends, so
	// the caller keeps Root open for as long as the run (the run's
	// workspace is). Only a reference needs none.
	Root *os.Root
	// FromProject says Spec comes from the workspace's own (untrusted)
	// configuration: it may name files inside the workspace only.
	FromProject bool
	// NoPull leaves a missing image reference missing instead of pulling
	// it (`shiro doctor` only looks).
	NoPull bool
	// Pull pulls a reference's tag even when the engine has it (--pull);
	// a reference pinned by digest is exact and is not pulled again.
	Pull bool
	// Progress receives build and pull progress; nil discards it.
	Progress io.Writer
	// Credentials finds the registry credentials of pulls and of a build's
	// FROM images; nil looks in the docker config file (regauth.Lookup).
	Credentials CredentialLookup
	// Build limits a project build like the session's sandbox: Network is
	// "bridge" or "none" (empty means bridge); Memory (bytes) and CPUs,
	// zero meaning the sandbox defaults. The classic builder has no process
	// limit.
	Build BuildLimits
	// Secrets are the user's build secrets, served to BuildKit builds
	// through the build's session; LookupEnv reads the variables they
	// name (default os.LookupEnv).
	Secrets   []sandbox.BuildSecret
	LookupEnv func(string) (string, bool)
}

// BuildLimits are the network and resources a project build gets.
type BuildLimits struct {
	Network string
	Memory  int64
	CPUs    float64
}

// BuildNetwork is the engine's network mode for a build under the
// session's network setting: a build cannot ask (its RUN steps do not go
// through the egress proxy), so it gets a network only in open mode.
func BuildNetwork(session string) string {
	switch session {
	case NetworkOpen, "bridge":
		return "bridge"
	}
	return "none"
}

// options are the limits as the engine's build options, defaults applied.
func (l BuildLimits) apply(o *client.ImageBuildOptions) {
	o.NetworkMode = BuildNetwork(l.Network)
	o.Memory = cmp.Or(l.Memory, int64(sandbox.DefaultMemory))
	o.MemorySwap = o.Memory // no swap beyond the limit
	o.CPUPeriod = 100000
	o.CPUQuota = int64(cmp.Or(l.CPUs, sandbox.DefaultCPUs) * 100000)
}

// Validate reports requests that cannot be resolved.
func (r ImageRequest) Validate() error {
	var errs []error
	if strings.TrimSpace(r.Spec) == "" {
		errs = append(errs, errors.New("no image"))
	}
	if !filepath.IsAbs(r.Workspace) {
		errs = append(errs, fmt.Errorf("workspace %q is not an absolute path", r.Workspace))
	}
	return errors.Join(errs...)
}

// ResolvedImage is the local image a sandbox runs and what came with it.
type ResolvedImage struct {
	// Ref is the local image reference to run.
	Ref  string
	Kind ImageKind
	// Source is the Dockerfile or devcontainer.json it comes from (empty
	// for a reference).
	Source string
	// Env holds NAME=value entries from a devcontainer.json (containerEnv,
	// remoteEnv). Never print the values.
	Env []string
	// Notices name what was ignored (devcontainer fields); they were
	// written to ImageRequest.Progress already.
	Notices []string
	// Built is set when this call built the image; Pulled when it pulled it.
	Built, Pulled bool
}

// Reference is an image reference the engine has, ready to run as it is.
func Reference(ref string) ResolvedImage { return ResolvedImage{Ref: ref, Kind: KindReference} }

// resolveAPI is the part of the client image resolution uses.
type resolveAPI interface {
	ImageAPI
	ImagePull(ctx context.Context, ref string, opts client.ImagePullOptions) (client.ImagePullResponse, error)
	ImageList(ctx context.Context, opts client.ImageListOptions) (client.ImageListResult, error)
	ImageRemove(ctx context.Context, image string, opts client.ImageRemoveOptions) (client.ImageRemoveResult, error)
}

var _ resolveAPI = (*client.Client)(nil)

// projectImageBuilds shares in-flight project builds between callers.
var projectImageBuilds imageBuilds

// ResolveImage turns an image setting into a local image: a reference is
// used when present and pulled otherwise; a Dockerfile is built (once per
// content of its context) with its directory as the context; a
// devcontainer.json gives an image or a Dockerfile to build, and an
// environment.
func (e *Engine) ResolveImage(ctx context.Context, req ImageRequest) (ResolvedImage, error) {
	return resolveImage(ctx, e.api, req, &projectImageBuilds)
}

func resolveImage(ctx context.Context, api resolveAPI, req ImageRequest, builds *imageBuilds) (ResolvedImage, error) {
	if err := req.Validate(); err != nil {
		return ResolvedImage{}, fmt.Errorf("image: %w", err)
	}
	if req.Progress == nil {
		req.Progress = io.Discard
	}
	kind, p := ClassifyImage(req.Spec)
	if kind == KindReference {
		if _, err := reference.ParseNormalizedNamed(p); err != nil {
			return ResolvedImage{}, fmt.Errorf("image %q is neither an image reference nor a path to a Dockerfile or devcontainer.json: %w", p, err)
		}
		pulled, err := ensureReference(ctx, api, p, req)
		return ResolvedImage{Ref: p, Kind: kind, Pulled: pulled}, err
	}
	loc, err := newLocator(req)
	if err != nil {
		return ResolvedImage{}, err
	}
	if kind == KindDevcontainer && p == DevcontainerWord {
		if p, err = loc.findDevcontainer(); err != nil {
			return ResolvedImage{}, err
		}
	}
	place, err := loc.place(p, req.Workspace)
	if err != nil {
		return ResolvedImage{}, fmt.Errorf("sandbox image %w", err)
	}
	if kind == KindDockerfile && loc.isDir(place) {
		place = place.join("Dockerfile")
	}
	if kind == KindDockerfile {
		bs, err := loc.dockerfileBuild(place, place.dir(), nil, "")
		if err != nil {
			return ResolvedImage{}, err
		}
		defer bs.close()
		bs.source = place.abs
		ref, built, err := buildProjectImage(ctx, api, bs, req, builds)
		return ResolvedImage{Ref: ref, Kind: kind, Source: place.abs, Built: built}, err
	}
	return resolveDevcontainer(ctx, api, loc, place, req, builds)
}

func resolveDevcontainer(ctx context.Context, api resolveAPI, loc *locator, file place, req ImageRequest, builds *imageBuilds) (ResolvedImage, error) {
	data, err := loc.readFile(file, maxDevcontainerSize+1)
	if err != nil {
		return ResolvedImage{}, err
	}
	shown := file.abs
	if file.inside {
		shown = filepath.FromSlash(file.rel)
	}
	dc, err := parseDevcontainer(data, shown, req.Workspace)
	if err != nil {
		return ResolvedImage{}, err
	}
	if err := dc.loadCompose(ctx, loc, file); err != nil {
		return ResolvedImage{}, err
	}
	// The notices come first: a build may take a while.
	for _, n := range dc.Notices {
		fmt.Fprintf(req.Progress, "[notice] %s\n", n)
	}
	res := ResolvedImage{Kind: KindDevcontainer, Source: file.abs, Notices: dc.Notices}
	if dc.Image != "" {
		if _, err := reference.ParseNormalizedNamed(dc.Image); err != nil {
			return res, fmt.Errorf("%s: image %q: %w", file.abs, dc.Image, err)
		}
		res.Ref = dc.Image
		if res.Pulled, err = ensureReference(ctx, api, dc.Image, req); err != nil {
			return res, err
		}
	} else {
		// The file's own paths are the repository's choice when the file
		// is in the workspace: they may not leave it.
		if file.inside {
			loc.trusted = false
		}
		base := file.dir()
		df, err := loc.place(dc.Dockerfile, base.abs)
		if err != nil {
			return res, fmt.Errorf("%s: build.dockerfile: %w", file.abs, err)
		}
		cdir, err := loc.place(dc.Context, base.abs)
		if err != nil {
			return res, fmt.Errorf("%s: build.context: %w", file.abs, err)
		}
		bs, err := loc.dockerfileBuild(df, cdir, dc.Args, dc.Target)
		if err != nil {
			return res, fmt.Errorf("%s: %w", file.abs, err)
		}
		defer bs.close()
		bs.source = file.abs
		if res.Ref, res.Built, err = buildProjectImage(ctx, api, bs, req, builds); err != nil {
			return res, err
		}
	}
	img, err := api.ImageInspect(ctx, res.Ref)
	if err != nil {
		return res, fmt.Errorf("inspect image %s: %w", res.Ref, err)
	}
	var imageEnv []string
	if img.Config != nil {
		imageEnv = img.Config.Env
	}
	res.Env = dc.env(imageEnv)
	return res, nil
}

// ClassifyImage says what an image setting names, and the reference or
// path (sandbox.ClassifyImage).
func ClassifyImage(spec string) (ImageKind, string) { return sandbox.ClassifyImage(spec) }

// ensureReference makes sure the engine has ref: present, or pulled with
// progress. It reports whether it pulled.
func ensureReference(ctx context.Context, api resolveAPI, ref string, req ImageRequest) (bool, error) {
	ok, err := imageExists(ctx, api, ref)
	if err != nil {
		return false, err
	}
	if ok && req.Pull && !req.NoPull && !pinned(ref) && ref != images.Tag() {
		fmt.Fprintf(req.Progress, "pulling %s (--pull)\n", ref)
		if err := pullImage(ctx, api, ref, req.Progress, req.Credentials); err != nil {
			// The engine's copy still runs: --pull asks for news, not
			// for a start that fails offline.
			fmt.Fprintf(req.Progress, "[notice] pulling %s failed (%v); the local image is used\n", ref, err)
			return false, nil
		}
		return true, nil
	}
	if ok {
		return false, nil
	}
	if ref == images.Tag() {
		return false, &MissingImageError{Image: ref}
	}
	if req.NoPull {
		return false, &UnavailableImageError{Ref: ref}
	}
	fmt.Fprintf(req.Progress, "pulling %s\n", ref)
	if err := pullImage(ctx, api, ref, req.Progress, req.Credentials); err != nil {
		return false, &UnavailableImageError{Ref: ref, PullErr: err}
	}
	return true, nil
}

// pullImage pulls ref with its registry's credentials.
func pullImage(ctx context.Context, api resolveAPI, ref string, progress io.Writer, lookup CredentialLookup) error {
	auth, err := pullAuth(ctx, ref, lookup, progress)
	if err != nil {
		return err
	}
	res, err := api.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: auth.header})
	if err != nil {
		return auth.explain(err)
	}
	defer res.Close()
	if err := decodeImageStream(res, progress); err != nil {
		return auth.explain(err)
	}
	ok, err := imageExists(ctx, api, ref)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the image is missing after the pull")
	}
	return nil
}

// UnavailableImageError is an image reference the engine does not have and
// could not pull.
type UnavailableImageError struct {
	Ref string
	// PullErr is why the pull failed; nil when no pull was tried.
	PullErr error
}

func (e *UnavailableImageError) Error() string {
	if ae := (*RegistryAuthError)(nil); errors.As(e.PullErr, &ae) {
		return fmt.Sprintf("image %s: %v", e.Ref, ae)
	}
	why := "it is not present locally"
	if e.PullErr != nil {
		why = fmt.Sprintf("it is not present locally and pulling it failed (%v)", e.PullErr)
	}
	return fmt.Sprintf("image %s: %s. Build it (`docker build -t %s DIR`), load it (`docker load -i FILE.tar`), "+
		"or point --image at a Dockerfile or devcontainer.json and shiro builds it", e.Ref, why, e.Ref)
}

func (e *UnavailableImageError) Unwrap() error { return e.PullErr }

// buildSpec is a Dockerfile build ready to go.
type buildSpec struct {
	ctx    *buildContext
	ctxDir string // for messages
	// open opens the context directory again, for the build itself: a
	// build shared with other callers must not use this caller's handle,
	// which it closes when it stops waiting.
	open   func() (*os.Root, error)
	args   map[string]*string
	target string
	source string
}

func (b *buildSpec) close() { b.ctx.root.Close() }

// buildProjectImage builds bs once per hash of its context and returns the
// tag, and whether this call built it.
func buildProjectImage(ctx context.Context, api resolveAPI, bs *buildSpec, req ImageRequest, builds *imageBuilds) (string, bool, error) {
	df := bs.ctx.extra
	if df == nil {
		var err error
		if df, err = readContextFile(bs.ctx.root, bs.ctx.dockerfile, maxDockerfile); err != nil {
			return "", false, fmt.Errorf("read %s: %w", bs.source, err)
		}
	}
	usesBase := strings.Contains(string(df), BaseImageArg) || strings.Contains(string(df), images.Tag())
	if strings.Contains(string(df), BaseImageArg) {
		if bs.args == nil {
			bs.args = map[string]*string{}
		}
		if _, set := bs.args[BaseImageArg]; !set {
			tag := images.Tag()
			bs.args[BaseImageArg] = &tag
		}
	}
	hash, err := bs.ctx.hashContext(bs.args, bs.target)
	if err != nil {
		return "", false, err
	}
	tag := ProjectImageRepo + ":" + hash[:16]
	if ok, err := imageExists(ctx, api, tag); err != nil || ok {
		return tag, false, err
	}
	if usesBase {
		if err := ensureImage(ctx, api, images.Tag(), BuildOptions{Progress: req.Progress}); err != nil {
			return "", false, err
		}
	}
	auth := newBuildAuth(ctx, df, bs.args, req.Credentials, func(ref string) bool {
		ok, _ := imageExists(ctx, api, ref)
		return ok
	})
	features := scanDockerfile(df)
	builder := builderKind{}
	if features.needBuildKit() {
		builder = chooseBuilder(ctx, api)
	}
	notice, err := features.check(builder)
	if err != nil {
		return "", false, fmt.Errorf("build the image from %s: %w", bs.source, err)
	}
	if notice != "" {
		fmt.Fprintf(req.Progress, "[notice] %s\n", notice)
	}
	if len(req.Secrets) > 0 && features.Mount && !builder.buildkit {
		fmt.Fprintf(req.Progress, "[notice] the engine has no BuildKit: the build secrets are not given to the classic builder\n")
	}
	built := false
	err = builds.do(ctx, tag, req.Progress, func(ctx context.Context, progress io.Writer) error {
		// Another process may have finished the same build meanwhile.
		if ok, err := imageExists(ctx, api, tag); err != nil || ok {
			return err
		}
		fmt.Fprintf(progress, "building %s from %s (context %s, %d files)\n", tag, bs.source, bs.ctxDir, len(bs.ctx.entries))
		start := time.Now()
		root, err := bs.open()
		if err != nil {
			return err
		}
		defer root.Close()
		pr, pw := io.Pipe()
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			pw.CloseWithError(bs.ctx.writeTar(pw, root))
		}()
		// Whatever happens, the engine's reading ends here, and so does
		// the writer.
		defer func() {
			pr.CloseWithError(errors.New("build ended"))
			<-sent
		}()
		opts := client.ImageBuildOptions{
			Tags:        []string{tag},
			Dockerfile:  bs.ctx.dockerfile,
			BuildArgs:   bs.args,
			Target:      bs.target,
			Remove:      true,
			ForceRemove: true,
			Labels:      map[string]string{LabelBuilt: "true", LabelSource: bs.source},
			Version:     build.BuilderV1,
			AuthConfigs: auth.configs,
		}
		req.Build.apply(&opts)
		var redact func(string) string
		if builder.buildkit {
			lookup := req.LookupEnv
			if lookup == nil {
				lookup = os.LookupEnv
			}
			secrets, err := readBuildSecrets(req.Secrets, lookup)
			if err != nil {
				return err
			}
			redact = redactor(secrets)
			sess, err := startBuildSession(ctx, api.(sessionAPI), secrets, req.Credentials)
			if err != nil {
				return err
			}
			defer sess.close()
			opts.Version = build.BuilderBuildKit
			opts.SessionID = sess.id()
			// BuildKit names the engine's default network "default".
			shown := opts.NetworkMode
			if opts.NetworkMode == "bridge" {
				opts.NetworkMode = "default"
			}
			fmt.Fprintf(progress, "building with BuildKit; build limits: network %s (the engine's BuildKit applies no memory or CPU limit to RUN steps, which run as root inside the build)\n", shown)
		} else {
			fmt.Fprintf(progress, "build limits: network %s, memory %s, %g CPUs (RUN steps run as root inside the build)\n",
				opts.NetworkMode, formatBytes(opts.Memory), float64(opts.CPUQuota)/float64(opts.CPUPeriod))
		}
		// A failed or cancelled build leaves no tag behind: the classic
		// builder tags last, but a cancel can land just after it.
		defer func() {
			if built {
				return
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if ok, _ := imageExists(rctx, api, tag); ok {
				_, _ = api.ImageRemove(rctx, tag, client.ImageRemoveOptions{})
			}
		}()
		res, err := api.ImageBuild(ctx, pr, opts)
		if err != nil {
			return fmt.Errorf("start build: %w", err)
		}
		err = decodeBuildStream(res.Body, progress, redact)
		res.Body.Close()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if err != nil {
			return auth.explain(explainBuildError(err, opts), bs.args)
		}
		built = true
		fmt.Fprintf(progress, "built %s in %s\n", tag, time.Since(start).Round(100*time.Millisecond))
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("build the image from %s: %w", bs.source, err)
	}
	if ok, err := imageExists(ctx, api, tag); err != nil {
		return "", false, err
	} else if !ok {
		return "", false, fmt.Errorf("build the image from %s: image %s missing after a successful build", bs.source, tag)
	}
	if built {
		removeOlderBuilds(ctx, api, bs.source, tag)
	}
	return tag, built, nil
}

// explainBuildError adds to a failed RUN step what the build's limits
// have to do with it: a step killed (exit 137) most likely ran past the
// memory limit; under network none nothing can be fetched.
func explainBuildError(err error, opts client.ImageBuildOptions) error {
	var be *ImageBuildError
	if !errors.As(err, &be) {
		return err
	}
	keyword, _, _ := strings.Cut(be.Instruction, " ")
	if !strings.EqualFold(keyword, "RUN") {
		return err
	}
	switch {
	case strings.Contains(be.Message, "non-zero code: 137") && opts.Version != build.BuilderBuildKit:
		be.Message += fmt.Sprintf(" — the step was killed: it most likely ran past the build's memory limit of %s (the session's --memory / sandbox.memory)", formatBytes(opts.Memory))
	case opts.NetworkMode == "none":
		be.Message += " — the build has no network (a build gets one only with --network open)"
	}
	return err
}

// formatBytes shows a size in MiB or GiB.
func formatBytes(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%dg", n>>30)
	}
	return fmt.Sprintf("%dm", n>>20)
}

// removeOlderBuilds removes the images built earlier from the same source
// file. Images a container still uses stay (the engine refuses, and the
// refusal is ignored); `shiro sandbox prune` leaves them to the next build.
func removeOlderBuilds(ctx context.Context, api resolveAPI, source, keepTag string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	f := client.Filters{}.Add("label", LabelBuilt+"=true").Add("label", LabelSource+"="+source)
	list, err := api.ImageList(ctx, client.ImageListOptions{Filters: f})
	if err != nil {
		return
	}
	for _, img := range list.Items {
		if slices.Contains(img.RepoTags, keepTag) {
			continue
		}
		for _, t := range img.RepoTags {
			if strings.HasPrefix(t, ProjectImageRepo+":") {
				_, _ = api.ImageRemove(ctx, t, client.ImageRemoveOptions{})
			}
		}
	}
}

// place is a file or directory an image setting names.
type place struct {
	abs string
	// rel is the slash path inside the workspace when inside is set.
	rel    string
	inside bool
}

func (p place) dir() place {
	d := place{abs: filepath.Dir(p.abs), inside: p.inside}
	if p.inside {
		d.rel = path.Dir(p.rel)
	}
	return d
}

func (p place) join(name string) place {
	j := place{abs: filepath.Join(p.abs, name), inside: p.inside}
	if p.inside {
		j.rel = path.Join(p.rel, name)
	}
	return j
}

// locator finds the files an image setting names. Files inside the
// workspace are always read through an os.Root of it (confine.Tree), so no
// symlink leads out and only regular files are read, never blocking on a
// FIFO; files outside it only when the setting is trusted (the user's).
type locator struct {
	ws      string
	root    *os.Root
	trusted bool
}

// tree is the workspace as a confine.Tree.
func (l *locator) tree() confine.Tree { return confine.Tree{Root: l.root, Name: "the workspace"} }

// newLocator finds files for req in the workspace req.Root, which it
// reads and leaves open.
func newLocator(req ImageRequest) (*locator, error) {
	if req.Root == nil {
		return nil, fmt.Errorf("image %q: the workspace is not open", req.Spec)
	}
	return &locator{ws: req.Workspace, root: req.Root, trusted: !req.FromProject}, nil
}

// place resolves p (relative to base, an absolute directory).
func (l *locator) place(p, base string) (place, error) {
	orig := p
	if strings.HasPrefix(p, "~/") {
		if !l.trusted {
			return place{}, fmt.Errorf("%q is %w: a project's configuration cannot name files in your home directory", orig, ErrOutsideWorkspace)
		}
		home, err := os.UserHomeDir()
		if err != nil {
			return place{}, fmt.Errorf("%q: %w", orig, err)
		}
		p = filepath.Join(home, p[2:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	p = filepath.Clean(p)
	rel, err := filepath.Rel(l.ws, p)
	if err == nil && filepath.IsLocal(rel) || rel == "." {
		return place{abs: p, rel: filepath.ToSlash(rel), inside: true}, nil
	}
	if !l.trusted {
		return place{}, fmt.Errorf("%q is %w: a project's configuration, or a devcontainer.json in the workspace, can only name files inside it", orig, ErrOutsideWorkspace)
	}
	return place{abs: p}, nil
}

// findDevcontainer returns the workspace's devcontainer.json: the first
// that is there, whatever it is (a link out, a FIFO), so that reading it
// says why it is refused rather than that there is none.
func (l *locator) findDevcontainer() (string, error) {
	for _, rel := range []string{".devcontainer/devcontainer.json", ".devcontainer.json"} {
		if _, err := l.root.Lstat(rel); err == nil || confine.IsEscape(l.root, err) {
			return filepath.Join(l.ws, filepath.FromSlash(rel)), nil
		}
	}
	return "", fmt.Errorf("image %q: the workspace has no .devcontainer/devcontainer.json or .devcontainer.json", DevcontainerWord)
}

// isDir reports whether p is a directory.
func (l *locator) isDir(p place) bool {
	var fi fs.FileInfo
	var err error
	if p.inside {
		fi, err = l.root.Stat(p.rel)
	} else {
		fi, err = os.Stat(p.abs)
	}
	return err == nil && fi.IsDir()
}

// readFile reads a regular file of at most max bytes. Inside the
// workspace, a file that leads out or is not regular gives a
// *confine.Refusal naming it.
func (l *locator) readFile(p place, max int64) ([]byte, error) {
	var f *os.File
	var err error
	if p.inside {
		f, err = l.tree().Open(p.rel)
		if r, ok := confine.AsRefusal(err); ok {
			r.Path = p.abs
			return nil, r
		}
	} else {
		// Yours, but opened without blocking all the same.
		f, err = os.OpenFile(p.abs, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.abs, unwrapPathError(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.abs, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: not a regular file (%s)", p.abs, confine.Kind(fi.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.abs, err)
	}
	return data, nil
}

// opener returns a func that opens the directory p as a root, each call
// anew, through the workspace's root when p is inside it. It does not
// need l, only the workspace's root.
func (l *locator) opener(p place) func() (*os.Root, error) {
	ws := l.tree()
	return func() (*os.Root, error) {
		var r *os.Root
		var err error
		if p.inside {
			r, err = ws.OpenRoot(p.rel)
			if rf, ok := confine.AsRefusal(err); ok {
				rf.Path = "the build context " + p.abs
				return nil, rf
			}
		} else {
			// The user's own directory, outside the workspace.
			var t confine.Tree
			if t, err = confine.Open(p.abs, "the build context"); err == nil {
				r = t.Root
			}
		}
		if err != nil {
			return nil, fmt.Errorf("open the build context %s: %w", p.abs, unwrapPathError(err))
		}
		return r, nil
	}
}

// dockerfileBuild prepares the build of the Dockerfile df with the context
// directory cdir.
func (l *locator) dockerfileBuild(df, cdir place, args map[string]*string, target string) (*buildSpec, error) {
	open := l.opener(cdir)
	root, err := open()
	if err != nil {
		return nil, err
	}
	bc := &buildContext{root: root}
	// The Dockerfile goes by its path inside the context when it is there;
	// otherwise its content is added to the archive.
	inCtx := ""
	if rel, err := filepath.Rel(cdir.abs, df.abs); err == nil && filepath.IsLocal(rel) {
		inCtx = filepath.ToSlash(rel)
		if fi, err := root.Stat(inCtx); err != nil || !fi.Mode().IsRegular() {
			inCtx = "" // a symlink out of the context, or not a file: read it apart
		}
	}
	if inCtx != "" {
		bc.dockerfile = inCtx
	} else {
		data, err := l.readFile(df, maxDockerfile)
		if err != nil {
			root.Close()
			return nil, err
		}
		bc.extra, bc.dockerfile = data, contextFileName(data)
	}
	if bc.entries, err = scanContext(root, inCtx); err != nil {
		root.Close()
		return nil, fmt.Errorf("%s: %w", cdir.abs, err)
	}
	return &buildSpec{ctx: bc, ctxDir: cdir.abs, open: open, args: args, target: target}, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return errors.New("no such file or directory")
		}
		return pe.Err
	}
	return err
}
