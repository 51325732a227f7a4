package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
)

// ImageAPI is the part of the Docker Engine client the image functions use.
// *client.Client satisfies it.
type ImageAPI interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error)
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error)
}

var _ ImageAPI = (*client.Client)(nil)

// BuildOptions choose how the default sandbox image is built.
type BuildOptions struct {
	// Offline builds the root filesystem with debootstrap on this machine
	// and imports it, instead of building the Dockerfile (which pulls
	// debian:bookworm-slim from a registry). It needs root and debootstrap.
	Offline bool
	// Progress receives a readable account of the build; nil discards it.
	Progress io.Writer
	// Mirror is the Debian mirror of an offline build. Empty means
	// $SHIRO_DEBIAN_MIRROR, or debootstrap's default when that is unset.
	Mirror string
}

// Validate reports options that cannot work.
func (o BuildOptions) Validate() error {
	if o.Mirror != "" {
		if err := validateMirror(o.Mirror); err != nil {
			return err
		}
	}
	return nil
}

// ImageBuildError is a failure reported by the engine while it built an
// image, with the Dockerfile step it happened in.
type ImageBuildError struct {
	// Step is the step's position ("1/4"), empty when the build failed
	// before its first step.
	Step string
	// Instruction is the step's Dockerfile instruction
	// ("FROM debian:bookworm-slim").
	Instruction string
	// Message is the engine's error message.
	Message string
}

func (e *ImageBuildError) Error() string {
	if e.Step == "" {
		return e.Message
	}
	return fmt.Sprintf("step %s (%s): %s", e.Step, e.Instruction, e.Message)
}

// ImageExists reports whether the engine has the image ref, without
// pulling or building anything.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	return imageExists(ctx, e.api, ref)
}

// imageExists reports whether api's engine has the image ref.
func imageExists(ctx context.Context, api ImageAPI, ref string) (bool, error) {
	if _, err := api.ImageInspect(ctx, ref); err != nil {
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return true, nil
}

// ensureImage makes sure the engine has the image ref. The default image
// (images.Tag()) is built when missing, as BuildDefaultImageAuto does; any
// other missing image is a *MissingImageError.
func ensureImage(ctx context.Context, api ImageAPI, ref string, opts BuildOptions) error {
	ok, err := imageExists(ctx, api, ref)
	if err != nil || ok {
		return err
	}
	if ref != images.Tag() {
		return &MissingImageError{Image: ref}
	}
	return buildDefaultImage(ctx, api, opts, true, systemHost(), &defaultImageBuilds)
}

// BuildDefaultImage builds the default sandbox image and tags it
// images.Tag(): through the engine from images.Dockerfile(), or with
// debootstrap when opts.Offline is set. A build of the same tag already
// running in this process is joined rather than started again.
func (e *Engine) BuildDefaultImage(ctx context.Context, opts BuildOptions) error {
	return buildDefaultImage(ctx, e.api, opts, false, systemHost(), &defaultImageBuilds)
}

// BuildDefaultImageAuto is BuildDefaultImage that falls back to the offline
// build, and says so on opts.Progress, when the online build cannot get its
// base image (no registry, no network). Other failures are returned as they
// are.
func (e *Engine) BuildDefaultImageAuto(ctx context.Context, opts BuildOptions) error {
	return buildDefaultImage(ctx, e.api, opts, true, systemHost(), &defaultImageBuilds)
}

// defaultImageBuilds holds this process's in-flight builds of the default
// image.
var defaultImageBuilds imageBuilds

func buildDefaultImage(ctx context.Context, api ImageAPI, opts BuildOptions, auto bool, host offlineHost, builds *imageBuilds) error {
	if err := opts.Validate(); err != nil {
		return fmt.Errorf("build image: %w", err)
	}
	tag := images.Tag()
	err := builds.do(ctx, tag, opts.Progress, func(ctx context.Context, progress io.Writer) error {
		var err error
		switch {
		case opts.Offline:
			err = buildOffline(ctx, api, tag, opts.Mirror, progress, host)
		case auto:
			err = buildOnline(ctx, api, tag, progress)
			if err != nil && isBaseImageFailure(err) {
				fmt.Fprintf(progress, "\ncannot get the base image (%v)\nfalling back to an offline build with debootstrap\n\n", err)
				if offErr := buildOffline(ctx, api, tag, opts.Mirror, progress, host); offErr != nil {
					err = errors.Join(fmt.Errorf("online: %w", err), fmt.Errorf("offline: %w", offErr))
				} else {
					err = nil
				}
			}
		default:
			err = buildOnline(ctx, api, tag, progress)
		}
		if err != nil {
			return err
		}
		ok, err := imageExists(ctx, api, tag)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("image missing after a successful build")
		}
		fmt.Fprintf(progress, "built %s\n", tag)
		return nil
	})
	if err != nil {
		return fmt.Errorf("build image %s: %w", tag, err)
	}
	return nil
}

// imageLabels are put on the images shiro builds.
var imageLabels = map[string]string{LabelBuilt: "true"}

// buildOnline builds images.Dockerfile() through the engine's classic
// builder (BuildKit needs a session the API alone does not give).
func buildOnline(ctx context.Context, api ImageAPI, tag string, progress io.Writer) error {
	buildContext, err := dockerfileContext(images.Dockerfile())
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "building %s from the default Dockerfile\n", tag)
	res, err := api.ImageBuild(ctx, buildContext, client.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		Labels:      imageLabels,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("start build: %w", err)
	}
	defer res.Body.Close()
	return decodeImageStream(res.Body, progress)
}

// dockerfileContext returns a build context (a tar archive) that holds
// only a Dockerfile.
func dockerfileContext(df []byte) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	if _, err := tw.Write(df); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("write build context: %w", err)
	}
	return &buf, nil
}

// isBaseImageFailure reports whether an online build failed because the
// engine could not pull the base image: an engine error in the FROM step,
// or before the first step with a message that names a pull or the network.
func isBaseImageFailure(err error) bool {
	var be *ImageBuildError
	if !errors.As(err, &be) {
		return false
	}
	if be.Step != "" {
		keyword, _, _ := strings.Cut(be.Instruction, " ")
		return strings.EqualFold(keyword, "FROM")
	}
	msg := strings.ToLower(be.Message)
	for _, s := range []string{"pull", "registry", "not found", "manifest unknown", "connection", "no such host", "dial tcp", "timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// imageStreamMessage is one message of the engine's JSON progress stream.
// Engines older than the jsonstream types may send the error only as the
// plain "error" field.
type imageStreamMessage struct {
	jsonstream.Message
	ErrorText string `json:"error,omitempty"`
}

// decodeImageStream reads the JSON message stream of a build or an import
// and writes it to w as plain lines: the builder's output as it comes
// (its "Step n/m : INSTRUCTION" lines say which step runs), a line per
// layer status, and a progress bar per layer each quarter of the way
// (percent, bytes done and total). An error message from the
// engine ends it as an *ImageBuildError naming the step it happened in.
func decodeImageStream(r io.Reader, w io.Writer) error {
	return decodeBuildStream(r, w, nil)
}

// decodeBuildStream is decodeImageStream for a build that may run on
// BuildKit: its status messages become lines (buildkitTrace), with redact
// applied to every text of the build's own.
func decodeBuildStream(r io.Reader, w io.Writer, redact func(string) string) error {
	if w == nil {
		w = io.Discard
	}
	var (
		dec     = json.NewDecoder(r)
		pending string // builder output after its last newline
		step    string // the current "Step n/m : INSTRUCTION" line
		status  = map[string]string{}
		bucket  = map[string]int{} // layer+status → the quarter last shown
		total   = newTotals(w)
		trace   *buildkitTrace
	)
	for {
		var m imageStreamMessage
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read progress stream: %w", err)
		}
		if m.Error != nil || m.ErrorText != "" {
			msg := m.ErrorText
			if m.Error != nil && m.Error.Message != "" {
				msg = m.Error.Message
			}
			if trace != nil {
				return trace.stepError(msg)
			}
			return newImageBuildError(step, msg)
		}
		switch {
		case m.ID == buildkitTraceID && m.Aux != nil:
			if trace == nil {
				trace = newBuildkitTrace(w, redact)
			}
			if err := trace.add(*m.Aux); err != nil {
				return err
			}
		case m.Stream != "":
			io.WriteString(w, m.Stream)
			pending += m.Stream
			lines := strings.Split(pending, "\n")
			for _, line := range lines {
				if strings.HasPrefix(line, "Step ") {
					step = strings.TrimSpace(line)
					total.step(step)
				}
			}
			pending = lines[len(lines)-1]
		case m.Status != "":
			if m.Progress != nil {
				total.layer(m.ID, m.Status, m.Progress.Current, m.Progress.Total)
			} else {
				total.layer(m.ID, m.Status, 0, 0)
			}
			if m.Progress != nil && (m.Progress.Current > 0 || m.Progress.Total > 0) {
				// A bar per layer, a line each quarter of the way: enough
				// to see a pull move without flooding a log.
				if m.Progress.Total <= 0 || m.ID == "" {
					continue
				}
				pct := min(100, int(m.Progress.Current*100/m.Progress.Total))
				key := m.ID + "\x00" + m.Status
				if b, seen := bucket[key]; seen && b == pct/25 {
					continue
				}
				bucket[key] = pct / 25
				fmt.Fprintf(w, "%s: %s %s %3d%% %s/%s\n", m.ID, m.Status, progressBar(pct), pct, sandbox.HumanBytes(m.Progress.Current), sandbox.HumanBytes(m.Progress.Total))
				continue
			}
			if m.ID != "" {
				if status[m.ID] == m.Status {
					continue
				}
				status[m.ID] = m.Status
				fmt.Fprintf(w, "%s: %s\n", m.ID, m.Status)
			} else {
				fmt.Fprintln(w, m.Status)
			}
		}
	}
}

// progressBar draws pct (0-100) in ten cells.
func progressBar(pct int) string {
	n := pct / 10
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 10-n) + "]"
}

// newImageBuildError splits the classic builder's step line
// ("Step 1/4 : FROM debian:bookworm-slim") into the error's fields.
func newImageBuildError(stepLine, msg string) *ImageBuildError {
	e := &ImageBuildError{Message: strings.TrimSpace(msg)}
	if rest, ok := strings.CutPrefix(stepLine, "Step "); ok {
		n, ins, _ := strings.Cut(rest, " : ")
		e.Step, e.Instruction = strings.TrimSpace(n), strings.TrimSpace(ins)
	}
	return e
}

// validateMirror checks a Debian mirror URL for debootstrap.
func validateMirror(mirror string) error {
	u, err := url.Parse(mirror)
	if err != nil {
		return fmt.Errorf("debian mirror: %w", err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("debian mirror %q has no host", mirror)
		}
	case "file":
	default:
		return fmt.Errorf("debian mirror %q: want an http, https or file URL", mirror)
	}
	return nil
}

// imageBuilds shares one in-flight build per tag between concurrent callers
// in this process. The build runs on its own goroutine under a context that
// is cancelled once every caller waiting for it has given up; the last one
// to leave waits for the build to wind down (and clean up) before returning.
type imageBuilds struct {
	mu     sync.Mutex
	builds map[string]*imageBuild
	// joined, when set, is called each time a caller has joined a build
	// (tests use it to know every caller is in).
	joined func(tag string)
}

type imageBuild struct {
	done    chan struct{}
	err     error
	waiting int
	cancel  context.CancelFunc
	out     progressFanout
}

func (g *imageBuilds) do(ctx context.Context, tag string, progress io.Writer, fn func(ctx context.Context, progress io.Writer) error) error {
	g.mu.Lock()
	b, running := g.builds[tag]
	if running {
		b.waiting++
		g.mu.Unlock()
		if progress != nil {
			fmt.Fprintf(progress, "joining the build of %s already in progress\n", tag)
		}
		defer b.out.attach(progress)()
	} else {
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		b = &imageBuild{done: make(chan struct{}), cancel: cancel, waiting: 1}
		if g.builds == nil {
			g.builds = make(map[string]*imageBuild)
		}
		g.builds[tag] = b
		defer b.out.attach(progress)()
		go func() {
			err := fn(bctx, &b.out)
			cancel()
			g.mu.Lock()
			if g.builds[tag] == b {
				delete(g.builds, tag)
			}
			g.mu.Unlock()
			b.err = err
			close(b.done)
		}()
		g.mu.Unlock()
	}
	if g.joined != nil {
		g.joined(tag)
	}

	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	b.waiting--
	last := b.waiting == 0
	if last {
		b.cancel()
		if g.builds[tag] == b {
			delete(g.builds, tag)
		}
	}
	g.mu.Unlock()
	if last {
		<-b.done
	}
	return ctx.Err()
}

// progressFanout copies a build's progress to every caller waiting for it.
// A writer's errors are ignored: progress is for display and must not fail
// the build.
type progressFanout struct {
	mu   sync.Mutex
	next int
	ws   map[int]io.Writer
}

func (f *progressFanout) attach(w io.Writer) (detach func()) {
	if w == nil {
		return func() {}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ws == nil {
		f.ws = make(map[int]io.Writer)
	}
	id := f.next
	f.next++
	f.ws[id] = w
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.ws, id)
	}
}

// Total implements sandbox.TotalWriter: every caller whose writer takes
// totals gets it.
func (f *progressFanout) Total(t sandbox.Total) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.ws {
		sandbox.ReportTotal(w, t)
	}
}

func (f *progressFanout) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.ws {
		w.Write(p)
	}
	return len(p), nil
}
