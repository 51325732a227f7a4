package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
	"go.uber.org/goleak"

	"github.com/shiroagent/shiro/images"
)

// fakeImageAPI is an ImageAPI whose methods are its func fields; a nil
// field fails the call.
type fakeImageAPI struct {
	inspect func(ref string) (client.ImageInspectResult, error)
	build   func(buildContext io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error)
	imprt   func(src client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error)
}

func (f *fakeImageAPI) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	if f.inspect == nil {
		return client.ImageInspectResult{}, errors.New("unexpected ImageInspect")
	}
	return f.inspect(ref)
}

func (f *fakeImageAPI) ImageBuild(_ context.Context, buildContext io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error) {
	if f.build == nil {
		return client.ImageBuildResult{}, errors.New("unexpected ImageBuild")
	}
	return f.build(buildContext, opts)
}

func (f *fakeImageAPI) ImageImport(_ context.Context, src client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error) {
	if f.imprt == nil {
		return nil, errors.New("unexpected ImageImport")
	}
	return f.imprt(src, ref, opts)
}

func notFound(ref string) error {
	return fmt.Errorf("No such image: %s: %w", ref, cerrdefs.ErrNotFound)
}

// buildStream returns an ImageBuild answer carrying the given JSON lines.
func buildStream(lines ...string) client.ImageBuildResult {
	return client.ImageBuildResult{Body: io.NopCloser(strings.NewReader(strings.Join(lines, "\n")))}
}

const (
	fromStep  = `{"stream":"Step 1/4 : FROM debian:bookworm-slim"}`
	newline   = `{"stream":"\n"}`
	pullError = `{"errorDetail":{"message":"Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host"},"error":"Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host"}`
)

// offlineUnused is an offlineHost that fails the test when an offline
// build starts.
func offlineUnused(t *testing.T) offlineHost {
	return offlineHost{
		geteuid: func() int { t.Error("unexpected offline build"); return 1000 },
	}
}

func TestDecodeImageStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stream  string
		want    string
		wantErr *ImageBuildError
	}{
		{
			name: "builder output is copied as it comes",
			stream: fromStep + newline +
				`{"stream":" ---\u003e 1a2b3c\n"}` +
				`{"stream":"Step 2/4 : RUN apt-get update"}{"stream":"\n"}` +
				`{"stream":"Get:1 http://mirror.example/debian bookworm InRelease\n"}` +
				`{"aux":{"ID":"sha256:0123"}}` +
				`{"stream":"Successfully built 0123\n"}`,
			want: "Step 1/4 : FROM debian:bookworm-slim\n ---> 1a2b3c\nStep 2/4 : RUN apt-get update\n" +
				"Get:1 http://mirror.example/debian bookworm InRelease\nSuccessfully built 0123\n",
		},
		{
			name: "pull statuses are one line each, a bar per layer each quarter, no repeats",
			stream: `{"status":"Pulling from library/debian","id":"bookworm-slim"}` +
				`{"status":"Downloading","progressDetail":{"current":100,"total":1000},"progress":"[=>  ]","id":"a1"}` +
				`{"status":"Downloading","progressDetail":{"current":200,"total":1000},"id":"a1"}` +
				`{"status":"Downloading","progressDetail":{"current":2600000,"total":5000000},"id":"b2"}` +
				`{"status":"Downloading","progressDetail":{"current":600,"total":1000},"id":"a1"}` +
				`{"status":"Pull complete","progressDetail":{},"id":"a1"}` +
				`{"status":"Pull complete","id":"a1"}` +
				`{"status":"sha256:0123"}`,
			want: "bookworm-slim: Pulling from library/debian\n" +
				"a1: Downloading [#.........]  10% 100B/1.0kB\n" +
				"b2: Downloading [#####.....]  52% 2.6MB/5.0MB\n" +
				"a1: Downloading [######....]  60% 600B/1.0kB\n" +
				"a1: Pull complete\nsha256:0123\n",
		},
		{
			name:    "an error names the step it happened in",
			stream:  fromStep + newline + pullError,
			want:    "Step 1/4 : FROM debian:bookworm-slim\n",
			wantErr: &ImageBuildError{Step: "1/4", Instruction: "FROM debian:bookworm-slim", Message: `Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host`},
		},
		{
			name:    "a step line without its newline yet still counts",
			stream:  `{"stream":"Step 3/4 : RUN false"}{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"}}`,
			want:    "Step 3/4 : RUN false",
			wantErr: &ImageBuildError{Step: "3/4", Instruction: "RUN false", Message: "The command '/bin/sh -c false' returned a non-zero code: 1"},
		},
		{
			name:    "an error before the first step",
			stream:  `{"error":"dockerfile parse error line 1: unknown instruction: FORM"}`,
			wantErr: &ImageBuildError{Message: "dockerfile parse error line 1: unknown instruction: FORM"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := decodeImageStream(strings.NewReader(tt.stream), &out)
			if got := out.String(); got != tt.want {
				t.Errorf("output = %q, want %q", got, tt.want)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("decodeImageStream() = %v", err)
				}
				return
			}
			var be *ImageBuildError
			if !errors.As(err, &be) {
				t.Fatalf("decodeImageStream() = %v, want an *ImageBuildError", err)
			}
			if *be != *tt.wantErr {
				t.Errorf("error = %+v, want %+v", *be, *tt.wantErr)
			}
		})
	}

	t.Run("a broken stream is an error", func(t *testing.T) {
		t.Parallel()
		err := decodeImageStream(strings.NewReader(`{"stream":"Step 1/4`), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "read progress stream") {
			t.Errorf("decodeImageStream() = %v, want a read error", err)
		}
	})
}

func TestImageBuildErrorMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  ImageBuildError
		want string
	}{
		{"with a step", ImageBuildError{Step: "1/4", Instruction: "FROM debian:bookworm-slim", Message: "no such host"}, "step 1/4 (FROM debian:bookworm-slim): no such host"},
		{"without a step", ImageBuildError{Message: "parse error"}, "parse error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestImageExists(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name    string
		err     error
		want    bool
		wantErr error
	}{
		{name: "present", want: true},
		{name: "missing", err: notFound("x")},
		{name: "engine error", err: boom, wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeImageAPI{inspect: func(string) (client.ImageInspectResult, error) { return client.ImageInspectResult{}, tt.err }}
			got, err := ImageExists(t.Context(), api, "x")
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("ImageExists() error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ImageExists() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEnsureImage(t *testing.T) {
	t.Parallel()
	t.Run("a present image is not built", func(t *testing.T) {
		t.Parallel()
		api := &fakeImageAPI{inspect: func(string) (client.ImageInspectResult, error) { return client.ImageInspectResult{}, nil }}
		if err := EnsureImage(t.Context(), api, images.Tag(), BuildOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another missing image is a MissingImageError", func(t *testing.T) {
		t.Parallel()
		api := &fakeImageAPI{inspect: func(ref string) (client.ImageInspectResult, error) { return client.ImageInspectResult{}, notFound(ref) }}
		err := EnsureImage(t.Context(), api, "example/other:1", BuildOptions{})
		var missing *MissingImageError
		if !errors.As(err, &missing) || missing.Image != "example/other:1" {
			t.Fatalf("EnsureImage() = %v, want a MissingImageError for example/other:1", err)
		}
	})
	t.Run("an invalid mirror is refused before anything is built", func(t *testing.T) {
		t.Parallel()
		api := &fakeImageAPI{inspect: func(ref string) (client.ImageInspectResult, error) { return client.ImageInspectResult{}, notFound(ref) }}
		err := EnsureImage(t.Context(), api, images.Tag(), BuildOptions{Mirror: "ftp://example.org/debian"})
		if err == nil || !strings.Contains(err.Error(), "want an http, https or file URL") {
			t.Fatalf("EnsureImage() = %v, want a mirror error", err)
		}
	})
}

func TestBuildOptionsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mirror  string
		wantErr bool
	}{
		{mirror: ""},
		{mirror: "http://mirror.example/debian"},
		{mirror: "https://mirror.example/debian/"},
		{mirror: "file:///srv/mirror"},
		{mirror: "http:///debian", wantErr: true},
		{mirror: "mirror.example/debian", wantErr: true},
		{mirror: "ftp://example.org/debian", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.mirror, func(t *testing.T) {
			t.Parallel()
			err := BuildOptions{Mirror: tt.mirror}.Validate()
			if (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestBuildDefaultImageOnline(t *testing.T) {
	t.Parallel()
	var built atomic.Bool
	api := &fakeImageAPI{
		inspect: func(ref string) (client.ImageInspectResult, error) {
			if !built.Load() {
				return client.ImageInspectResult{}, notFound(ref)
			}
			return client.ImageInspectResult{}, nil
		},
		build: func(buildContext io.Reader, opts client.ImageBuildOptions) (client.ImageBuildResult, error) {
			if len(opts.Tags) != 1 || opts.Tags[0] != images.Tag() {
				t.Errorf("build tags = %q, want [%s]", opts.Tags, images.Tag())
			}
			if opts.Version != build.BuilderV1 {
				t.Errorf("builder version = %q, want the classic builder", opts.Version)
			}
			if opts.Labels[LabelBuilt] != "true" || opts.Labels[LabelManaged] != "" {
				t.Errorf("labels = %v, want %s=true and no %s", opts.Labels, LabelBuilt, LabelManaged)
			}
			tr := tar.NewReader(buildContext)
			hdr, err := tr.Next()
			if err != nil || hdr.Name != "Dockerfile" {
				t.Fatalf("build context starts with %v, %v; want the Dockerfile", hdr, err)
			}
			if df, _ := io.ReadAll(tr); !bytes.Equal(df, images.Dockerfile()) {
				t.Errorf("build context Dockerfile = %q, want images.Dockerfile()", df)
			}
			built.Store(true)
			return buildStream(fromStep, newline, `{"stream":"Successfully tagged `+images.Tag()+`\n"}`), nil
		},
	}
	var progress bytes.Buffer
	err := buildDefaultImage(t.Context(), api, BuildOptions{Progress: &progress}, false, offlineUnused(t), &imageBuilds{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Step 1/4 : FROM debian:bookworm-slim\n", "Successfully tagged", "built " + images.Tag()} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}

func TestBuildDefaultImageAuto(t *testing.T) {
	t.Parallel()
	engineDown := errors.New("Cannot connect to the Docker daemon")
	tests := []struct {
		name         string
		build        func() (client.ImageBuildResult, error)
		wantOffline  bool
		wantErr      []string
		wantProgress string
	}{
		{
			name:         "a base image that cannot be pulled falls back to offline",
			build:        func() (client.ImageBuildResult, error) { return buildStream(fromStep, newline, pullError), nil },
			wantOffline:  true,
			wantErr:      []string{"online: step 1/4 (FROM debian:bookworm-slim): Get", "offline: the offline image build needs root"},
			wantProgress: "falling back to an offline build",
		},
		{
			name: "a pull error before the first step falls back to offline",
			build: func() (client.ImageBuildResult, error) {
				return buildStream(`{"error":"pull access denied for debian"}`), nil
			},
			wantOffline: true,
			wantErr:     []string{"pull access denied", "needs root"},
		},
		{
			name: "a failing RUN step is returned as it is",
			build: func() (client.ImageBuildResult, error) {
				return buildStream(`{"stream":"Step 2/4 : RUN apt-get update\n"}`, `{"error":"The command returned a non-zero code: 100"}`), nil
			},
			wantErr: []string{"step 2/4 (RUN apt-get update): The command returned a non-zero code: 100"},
		},
		{
			name:    "an unreachable engine is returned as it is",
			build:   func() (client.ImageBuildResult, error) { return client.ImageBuildResult{}, engineDown },
			wantErr: []string{"start build: Cannot connect to the Docker daemon"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeImageAPI{
				build: func(io.Reader, client.ImageBuildOptions) (client.ImageBuildResult, error) { return tt.build() },
			}
			var offline atomic.Bool
			host := offlineHost{geteuid: func() int { offline.Store(true); return 1000 }}
			var progress bytes.Buffer
			err := buildDefaultImage(t.Context(), api, BuildOptions{Progress: &progress}, true, host, &imageBuilds{})
			if err == nil {
				t.Fatal("buildDefaultImage() succeeded")
			}
			if offline.Load() != tt.wantOffline {
				t.Errorf("offline build tried = %v, want %v", offline.Load(), tt.wantOffline)
			}
			if tt.wantOffline && !errors.Is(err, ErrOfflineNeedsRoot) {
				t.Errorf("error = %v, want one wrapping ErrOfflineNeedsRoot", err)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
			}
			if !strings.Contains(progress.String(), tt.wantProgress) {
				t.Errorf("progress lacks %q:\n%s", tt.wantProgress, progress.String())
			}
		})
	}
}

// The tests of imageBuilds are not parallel: goleak checks no goroutine
// outlives them.

func TestImageBuildsShareOneBuild(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	joined := make(chan struct{}, 2)
	g := &imageBuilds{joined: func(string) { joined <- struct{}{} }}
	release := make(chan struct{})
	boom := errors.New("boom")
	var calls atomic.Int32
	fn := func(ctx context.Context, progress io.Writer) error {
		calls.Add(1)
		<-release
		fmt.Fprintln(progress, "step done")
		return boom
	}

	var (
		wg   sync.WaitGroup
		outs [2]bytes.Buffer
		errs [2]error
	)
	for i := range 2 {
		wg.Go(func() { errs[i] = g.do(t.Context(), "img:1", &outs[i], fn) })
	}
	<-joined
	<-joined
	close(release)
	wg.Wait()

	if n := calls.Load(); n != 1 {
		t.Errorf("the build ran %d times, want once", n)
	}
	for i := range 2 {
		if !errors.Is(errs[i], boom) {
			t.Errorf("caller %d got %v, want the build's error", i, errs[i])
		}
		if !strings.Contains(outs[i].String(), "step done") {
			t.Errorf("caller %d progress = %q, want the build's output", i, outs[i].String())
		}
	}
	if joining := strings.Count(outs[0].String()+outs[1].String(), "joining the build of img:1"); joining != 1 {
		t.Errorf("%d callers said they joined a running build, want 1", joining)
	}
}

func TestImageBuildsCallerLeaving(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	t.Run("others keep the build going", func(t *testing.T) {
		joined := make(chan struct{}, 2)
		g := &imageBuilds{joined: func(string) { joined <- struct{}{} }}
		release := make(chan struct{})
		var cancelledEarly atomic.Bool
		fn := func(ctx context.Context, _ io.Writer) error {
			<-release
			cancelledEarly.Store(ctx.Err() != nil)
			return nil
		}
		ctx1, cancel1 := context.WithCancel(t.Context())
		first := make(chan error)
		go func() { first <- g.do(ctx1, "img:1", nil, fn) }()
		<-joined
		second := make(chan error)
		go func() { second <- g.do(t.Context(), "img:1", nil, fn) }()
		<-joined

		cancel1()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Errorf("the caller that left got %v, want context.Canceled", err)
		}
		close(release)
		if err := <-second; err != nil {
			t.Errorf("the caller that stayed got %v, want the build's success", err)
		}
		if cancelledEarly.Load() {
			t.Error("the build was cancelled while a caller still waited for it")
		}
	})

	t.Run("the last one cancels it and waits for its cleanup", func(t *testing.T) {
		joined := make(chan struct{}, 1)
		g := &imageBuilds{joined: func(string) { joined <- struct{}{} }}
		var cleanedUp atomic.Bool
		fn := func(ctx context.Context, _ io.Writer) error {
			<-ctx.Done()
			cleanedUp.Store(true)
			return ctx.Err()
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- g.do(ctx, "img:1", nil, fn) }()
		<-joined
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("do() = %v, want context.Canceled", err)
		}
		if !cleanedUp.Load() {
			t.Error("do() returned before the cancelled build finished")
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if len(g.builds) != 0 {
			t.Errorf("%d builds still registered", len(g.builds))
		}
	})
}
