package docker

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
)

// fakeEngine is a resolveAPI over an in-memory set of images. A build adds
// its tag; its context archive is kept.
type fakeEngine struct {
	mu       sync.Mutex
	images   map[string]bool
	pullErr  string // the stream's error line for a pull; "" pulls fine
	pulls    []string
	auths    []string // each pull's RegistryAuth
	builds   []client.ImageBuildOptions
	contexts []map[string]string // each build's archive: name → content
	buildOut string              // extra stream lines of a build (e.g. an error)
	// tagOnError tags a build that fails all the same (a cancel landing
	// just after the classic builder tagged).
	tagOnError bool
	removed    []string
	// started, when set, is closed as a build starts; the build then waits
	// for gate before reading its context.
	started, gate chan struct{}
}

func newFakeEngine(present ...string) *fakeEngine {
	f := &fakeEngine{images: map[string]bool{}}
	for _, p := range present {
		f.images[p] = true
	}
	return f
}

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.images[ref] {
		return client.ImageInspectResult{}, notFound(ref)
	}
	return client.ImageInspectResult{}, nil
}

func (f *fakeEngine) ImageBuild(_ context.Context, buildContext io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error) {
	if f.started != nil {
		close(f.started)
		<-f.gate
	}
	files := map[string]string{}
	tr := tar.NewReader(buildContext)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return client.ImageBuildResult{}, err
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, opts)
	f.contexts = append(f.contexts, files)
	if f.buildOut != "" {
		if f.tagOnError {
			for _, tag := range opts.Tags {
				f.images[tag] = true
			}
		}
		return buildStream(f.buildOut), nil
	}
	for _, tag := range opts.Tags {
		f.images[tag] = true
	}
	return buildStream(`{"stream":"Step 1/1 : FROM x\n"}`, `{"stream":"Successfully built 0123\n"}`), nil
}

func (f *fakeEngine) ImageImport(context.Context, client.ImageImportSource, string, client.ImageImportOptions) (client.ImageImportResult, error) {
	return nil, errors.New("unexpected ImageImport")
}

type fakePull struct{ io.ReadCloser }

func (fakePull) JSONMessages(context.Context) iter.Seq2[jsonstream.Message, error] { return nil }
func (fakePull) Wait(context.Context) error                                        { return nil }

func (f *fakeEngine) ImagePull(_ context.Context, ref string, opts client.ImagePullOptions) (client.ImagePullResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls = append(f.pulls, ref)
	f.auths = append(f.auths, opts.RegistryAuth)
	if f.pullErr != "" {
		return fakePull{io.NopCloser(strings.NewReader(f.pullErr))}, nil
	}
	f.images[ref] = true
	return fakePull{io.NopCloser(strings.NewReader(`{"status":"Pulling from x","id":"1"}`))}, nil
}

func (f *fakeEngine) ImageList(context.Context, client.ImageListOptions) (client.ImageListResult, error) {
	return client.ImageListResult{}, nil
}

func (f *fakeEngine) ImageRemove(_ context.Context, ref string, _ client.ImageRemoveOptions) (client.ImageRemoveResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.images, ref)
	f.removed = append(f.removed, ref)
	return client.ImageRemoveResult{}, nil
}

func TestResolveDockerfileBuildGetsTheSessionLimits(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"Dockerfile": "FROM x\nRUN big\n"})
	eng := newFakeEngine()
	eng.tagOnError = true
	eng.buildOut = `{"stream":"Step 2/2 : RUN big"}` + "\n" + `{"errorDetail":{"code":1,"message":"The command '/bin/sh -c big' returned a non-zero code: 137"}}`
	var progress strings.Builder
	_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "./Dockerfile", Workspace: ws, Root: openRoot(t, ws), Progress: &progress,
		Build: BuildLimits{Network: "none", Memory: 64 << 20, CPUs: 0.5}}, &imageBuilds{})
	if err == nil || !strings.Contains(err.Error(), "ran past the build's memory limit of 64m") {
		t.Fatalf("error %v", err)
	}
	o := eng.builds[0]
	if o.NetworkMode != "none" || o.Memory != 64<<20 || o.MemorySwap != 64<<20 || o.CPUQuota != 50000 || o.CPUPeriod != 100000 {
		t.Errorf("build options: network %q memory %d swap %d quota %d/%d", o.NetworkMode, o.Memory, o.MemorySwap, o.CPUQuota, o.CPUPeriod)
	}
	if len(eng.removed) != 1 || eng.images[eng.removed[0]] {
		t.Errorf("a failed build left its tag: removed %v, images %v", eng.removed, eng.images)
	}
	if !strings.Contains(progress.String(), "build limits: network none, memory 64m, 0.5 CPUs") {
		t.Errorf("progress:\n%s", progress.String())
	}
	// Without limits, the sandbox's defaults.
	eng = newFakeEngine()
	if _, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "./Dockerfile", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{}); err != nil {
		t.Fatal(err)
	}
	// The default session network is ask, and a build cannot ask: none.
	if o := eng.builds[0]; o.NetworkMode != "none" || o.Memory != 4<<30 || o.CPUQuota != 200000 {
		t.Errorf("default build options: %q %d %d", o.NetworkMode, o.Memory, o.CPUQuota)
	}
}

func TestClassifyImage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec string
		want ImageKind
	}{
		{"golang:1.22", KindReference},
		{"ghcr.io/org/team-image:v3", KindReference},
		{"localhost:5000/x", KindReference},
		{"Dockerfile", KindDockerfile},
		{"tools/Dockerfile.dev", KindDockerfile},
		{"ci/build.Dockerfile", KindDockerfile},
		{"Containerfile", KindDockerfile},
		{"./docker", KindDockerfile},
		{"/abs/dir", KindDockerfile},
		{"~/team/Dockerfile", KindDockerfile},
		{"devcontainer", KindDevcontainer},
		{".devcontainer/devcontainer.json", KindDevcontainer},
		{"../shared/python.json", KindDevcontainer},
	}
	for _, tc := range tests {
		if got, _ := ClassifyImage(tc.spec); got != tc.want {
			t.Errorf("ClassifyImage(%q) = %s, want %s", tc.spec, got, tc.want)
		}
	}
}

func TestResolveReference(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tests := []struct {
		name      string
		eng       *fakeEngine
		req       ImageRequest
		wantPulls int
		wantErr   string
	}{
		{name: "present: used as it is", eng: newFakeEngine("golang:1.22"), req: ImageRequest{Spec: "golang:1.22"}},
		{name: "missing: pulled", eng: newFakeEngine(), req: ImageRequest{Spec: "golang:1.22"}, wantPulls: 1},
		{
			name:      "no registry: a clear error on how to build or load it",
			eng:       &fakeEngine{images: map[string]bool{}, pullErr: `{"error":"Get \"https://registry-1.docker.io/v2/\": dial tcp: no such host"}`},
			req:       ImageRequest{Spec: "team/image:3"},
			wantPulls: 1,
			wantErr:   "image team/image:3: it is not present locally and pulling it failed (Get \"https://registry-1.docker.io/v2/\": dial tcp: no such host). Build it (`docker build -t team/image:3 DIR`), load it (`docker load -i FILE.tar`), or point --image at a Dockerfile",
		},
		{name: "NoPull only looks", eng: newFakeEngine(), req: ImageRequest{Spec: "x:1", NoPull: true}, wantErr: "image x:1: it is not present locally. Build it"},
		{name: "a missing digest-pinned image is pulled by its digest", eng: newFakeEngine(), req: ImageRequest{Spec: "golang@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}, wantPulls: 1},
		{name: "--pull pulls a present tag again", eng: newFakeEngine("golang:1.22"), req: ImageRequest{Spec: "golang:1.22", Pull: true}, wantPulls: 1},
		{
			name: "--pull leaves a digest-pinned image alone",
			eng:  newFakeEngine("golang@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
			req:  ImageRequest{Spec: "golang@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Pull: true},
		},
		{
			name:      "--pull offline runs the local image",
			eng:       &fakeEngine{images: map[string]bool{"team/image:3": true}, pullErr: `{"error":"dial tcp: no such host"}`},
			req:       ImageRequest{Spec: "team/image:3", Pull: true},
			wantPulls: 1,
		},
		{name: "the default image is never pulled", eng: newFakeEngine(), req: ImageRequest{Spec: images.Tag()}, wantErr: "shiro image build"},
		{name: "not a reference", eng: newFakeEngine(), req: ImageRequest{Spec: "Not A Ref"}, wantErr: "neither an image reference nor a path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.req.Workspace = ws
			res, err := resolveImage(t.Context(), tc.eng, tc.req, &imageBuilds{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
			} else if err != nil || res.Ref != tc.req.Spec || res.Kind != KindReference {
				t.Fatalf("got %+v, %v", res, err)
			}
			if len(tc.eng.pulls) != tc.wantPulls {
				t.Errorf("%d pulls, want %d", len(tc.eng.pulls), tc.wantPulls)
			}
			for _, p := range tc.eng.pulls {
				if p != tc.req.Spec {
					t.Errorf("pulled %q, want exactly %q", p, tc.req.Spec)
				}
			}
		})
	}
}

func TestResolveDockerfileBuildsOnce(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		"docker/Dockerfile":    "ARG " + BaseImageArg + "\nFROM ${" + BaseImageArg + "}\nCOPY tool.sh /usr/local/bin/\n",
		"docker/tool.sh":       "echo tool",
		"docker/.dockerignore": "*.tmp\n",
		"docker/x.tmp":         "ignored",
		"outside.txt":          "not in the context",
	})
	eng := newFakeEngine(images.Tag())
	var progress strings.Builder
	req := ImageRequest{Spec: "docker/Dockerfile", Workspace: ws, Root: openRoot(t, ws), FromProject: true, Progress: &progress}
	first, err := resolveImage(t.Context(), eng, req, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Built || first.Kind != KindDockerfile || !strings.HasPrefix(first.Ref, ProjectImageRepo+":") || first.Source != filepath.Join(ws, "docker", "Dockerfile") {
		t.Fatalf("first: %+v", first)
	}
	if len(eng.builds) != 1 {
		t.Fatalf("%d builds", len(eng.builds))
	}
	b := eng.builds[0]
	if b.Dockerfile != "Dockerfile" || b.Version != build.BuilderV1 || !slices.Equal(b.Tags, []string{first.Ref}) ||
		b.Labels[LabelBuilt] != "true" || b.Labels[LabelSource] != first.Source {
		t.Errorf("build options %+v", b)
	}
	if v := b.BuildArgs[BaseImageArg]; v == nil || *v != images.Tag() {
		t.Errorf("%s = %v, want the default image", BaseImageArg, v)
	}
	files := slices.Sorted(func(yield func(string) bool) {
		for k := range eng.contexts[0] {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(files, []string{".dockerignore", "Dockerfile", "tool.sh"}) {
		t.Errorf("context %q", files)
	}
	if !strings.Contains(progress.String(), "building "+first.Ref) {
		t.Errorf("progress: %s", progress.String())
	}

	progress.Reset()
	second, err := resolveImage(t.Context(), eng, req, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Ref != first.Ref || second.Built || len(eng.builds) != 1 || progress.Len() != 0 {
		t.Errorf("second run rebuilt: %+v, %d builds, progress %q", second, len(eng.builds), progress.String())
	}

	writeTree(t, ws, map[string]string{"docker/tool.sh.new": "changed"})
	third, err := resolveImage(t.Context(), eng, req, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	if third.Ref == first.Ref || len(eng.builds) != 2 {
		t.Errorf("a changed context did not rebuild: %s", third.Ref)
	}
}

func TestResolveDockerfileBuildErrorNamesTheStep(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"Dockerfile": "FROM x\nRUN false\n"})
	eng := newFakeEngine()
	eng.buildOut = `{"stream":"Step 2/2 : RUN false"}` + "\n" + `{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"}}`
	_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "./Dockerfile", Workspace: ws, Root: openRoot(t, ws), Build: BuildLimits{Network: NetworkOpen}}, &imageBuilds{})
	want := "build the image from " + filepath.Join(ws, "Dockerfile") + ": step 2/2 (RUN false): The command '/bin/sh -c false' returned a non-zero code: 1"
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

func TestResolveStaysInTheWorkspace(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"Dockerfile": "FROM x\n", "secret": "s", "dc.json": `{"build": {"dockerfile": "Dockerfile"}}`})
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		"Dockerfile":                      "FROM x\n",
		"escape/Dockerfile":               "->" + filepath.Join(outside, "Dockerfile"),
		"linked":                          "->" + outside,
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "../Dockerfile", "context": "../.."}}`,
		"dc2/devcontainer.json":           `{"build": {"dockerfile": "` + filepath.Join(outside, "Dockerfile") + `"}}`,
	})
	tests := []struct {
		name    string
		spec    string
		project bool
		wantErr string // "" means it resolves
	}{
		{"a project's relative path out", "../x/Dockerfile", true, "is outside the workspace"},
		{"a project's absolute path out", filepath.Join(outside, "Dockerfile"), true, "is outside the workspace"},
		{"a project's path into home", "~/Dockerfile", true, "cannot name files in your home directory"},
		{"a project's Dockerfile inside", "Dockerfile", true, ""},
		{"a project's symlinked Dockerfile leading out", "escape/Dockerfile", true, "escape/Dockerfile is a symlink that leaves the workspace; not read"},
		{"a project's symlinked directory leading out", "linked/Dockerfile", true, "linked is a symlink that leaves the workspace; not read"},
		{"your own path out is fine", filepath.Join(outside, "Dockerfile"), false, ""},
		{"your own devcontainer outside may name its neighbours", filepath.Join(outside, "dc.json"), false, ""},
		{"a devcontainer in the workspace cannot take a context outside, even when you chose it", "devcontainer", false, `build.context: "../.." is outside the workspace`},
		{"nor a Dockerfile outside", "dc2/devcontainer.json", false, "build.dockerfile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eng := newFakeEngine()
			_, err := resolveImage(t.Context(), eng, ImageRequest{Spec: tc.spec, Workspace: ws, Root: openRoot(t, ws), FromProject: tc.project}, &imageBuilds{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if len(eng.builds) != 0 {
				t.Error("it built anyway")
			}
			for _, c := range eng.contexts {
				if _, ok := c["secret"]; ok {
					t.Error("a file from outside was sent")
				}
			}
		})
	}
}

func TestResolveDevcontainer(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{
		".devcontainer/devcontainer.json": `{
			// JSONC
			"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "3"},},
			"containerEnv": {"FOO": "bar"},
			"initializeCommand": "touch /tmp/x",
			"runArgs": ["--privileged"],
		}`,
		".devcontainer/Dockerfile": "FROM x\nARG V\n",
		"src/main.go":              "package main",
	})
	eng := newFakeEngine()
	var progress strings.Builder
	res, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "devcontainer", Workspace: ws, Root: openRoot(t, ws), Progress: &progress}, &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != KindDevcontainer || !slices.Equal(res.Env, []string{"FOO=bar"}) || len(res.Notices) != 2 {
		t.Fatalf("got %+v", res)
	}
	for _, want := range []string{`[notice] .devcontainer/devcontainer.json: "initializeCommand" is not run`, `"runArgs" is ignored`} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	b := eng.builds[0]
	if b.Dockerfile != ".devcontainer/Dockerfile" || b.BuildArgs["V"] == nil || *b.BuildArgs["V"] != "3" {
		t.Errorf("build options %+v", b)
	}
	if _, ok := eng.contexts[0]["src/main.go"]; !ok {
		t.Error("the context is not the workspace")
	}

	// An image instead of a build: pulled when missing.
	writeTree(t, ws, map[string]string{"img.json": `{"image": "python:3.12"}`})
	res, err = resolveImage(t.Context(), eng, ImageRequest{Spec: "./img.json", Workspace: ws, Root: openRoot(t, ws)}, &imageBuilds{})
	if err != nil || res.Ref != "python:3.12" || !res.Pulled {
		t.Errorf("got %+v, %v", res, err)
	}

	empty := t.TempDir()
	if _, err := resolveImage(t.Context(), eng, ImageRequest{Spec: "devcontainer", Workspace: empty, Root: openRoot(t, empty)}, &imageBuilds{}); err == nil ||
		!strings.Contains(err.Error(), "no .devcontainer/devcontainer.json") {
		t.Errorf("missing devcontainer: %v", err)
	}
}

func TestSharedBuildOutlivesTheCallerThatStarted(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"Dockerfile": "FROM x\n", "a.txt": "aaa"})
	eng := newFakeEngine()
	eng.started, eng.gate = make(chan struct{}), make(chan struct{})
	joined := make(chan struct{}, 2)
	builds := &imageBuilds{joined: func(string) { joined <- struct{}{} }}
	req := ImageRequest{Spec: "Dockerfile", Workspace: ws, Root: openRoot(t, ws)}

	// The first caller starts the build, then gives up while a second one
	// waits for it: the build goes on, reading its context through its own
	// handle, not the first caller's (closed by now).
	ctxA, cancelA := context.WithCancel(t.Context())
	errA := make(chan error, 1)
	go func() {
		_, err := resolveImage(ctxA, eng, req, builds)
		errA <- err
	}()
	<-eng.started
	<-joined
	type result struct {
		res ResolvedImage
		err error
	}
	resB := make(chan result, 1)
	go func() {
		r, err := resolveImage(t.Context(), eng, req, builds)
		resB <- result{r, err}
	}()
	<-joined
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("first caller: %v", err)
	}
	close(eng.gate)
	b := <-resB
	if b.err != nil {
		t.Fatalf("second caller: %v", b.err)
	}
	if len(eng.builds) != 1 || eng.contexts[0]["a.txt"] != "aaa" {
		t.Errorf("%d builds, context %v", len(eng.builds), eng.contexts)
	}
}

func TestBuildNetwork(t *testing.T) {
	t.Parallel()
	for session, want := range map[string]string{"": "none", NetworkAsk: "none", NetworkNone: "none", NetworkOpen: "bridge", "bridge": "bridge"} {
		if got := BuildNetwork(session); got != want {
			t.Errorf("BuildNetwork(%q) = %q, want %q", session, got, want)
		}
	}
}
