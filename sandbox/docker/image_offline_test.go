package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
)

// fakeDebootstrapHost is an offlineHost running as root whose debootstrap
// is the shell script script (its arguments are debootstrap's: the target
// is $4). The real tar does the rest. It records debootstrap's argv.
type fakeDebootstrapHost struct {
	mu   sync.Mutex
	argv []string
}

func (f *fakeDebootstrapHost) host(t *testing.T, script string, env map[string]string) offlineHost {
	return offlineHost{
		geteuid: func() int { return 0 },
		lookPath: func(file string) (string, error) {
			if file == "debootstrap" {
				return "/fake/debootstrap", nil
			}
			return exec.LookPath(file)
		},
		command: func(ctx context.Context, name string, args ...string) *exec.Cmd {
			if name != "/fake/debootstrap" {
				return exec.CommandContext(ctx, name, args...)
			}
			f.mu.Lock()
			f.argv = append([]string{name}, args...)
			f.mu.Unlock()
			return exec.CommandContext(ctx, "sh", append([]string{"-c", script, "debootstrap"}, args...)...)
		},
		getenv:  func(k string) string { return env[k] },
		tempDir: t.TempDir(),
	}
}

// assertEmptyDir fails the test when the build left something in dir.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("the build left %d entries in %s, want none", len(entries), dir)
	}
}

const fakeDebootstrapTree = `set -e
t="$4"
mkdir -p "$t/usr/bin" "$t/usr/share/doc/pkg" "$t/usr/share/man/man1" "$t/usr/share/locale/fr" \
	"$t/var/lib/apt/lists/partial" "$t/var/cache/apt/archives/partial"
echo hello > "$t/usr/bin/hello"
echo c > "$t/usr/share/doc/pkg/copyright"
echo c > "$t/usr/share/doc/pkg/changelog.gz"
ln -s pkg "$t/usr/share/doc/alias"
echo m > "$t/usr/share/man/man1/git.1.gz"
ln -s "@OUTSIDE@" "$t/usr/share/locale/escape"
echo l > "$t/var/lib/apt/lists/mirror.example_debian_dists_bookworm_InRelease"
echo b > "$t/var/cache/apt/pkgcache.bin"
echo d > "$t/var/cache/apt/archives/git_1_amd64.deb"
echo "I: Base system installed successfully."
`

func TestBuildOfflineImportsTheSlimmedTree(t *testing.T) {
	t.Parallel()
	// A symlink in the tree leads to outside: nothing there may go.
	outside := t.TempDir()
	if err := os.WriteFile(outside+"/keep", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var fake fakeDebootstrapHost
	host := fake.host(t, strings.ReplaceAll(fakeDebootstrapTree, "@OUTSIDE@", outside), nil)

	var (
		mu       sync.Mutex
		imported map[string]*tar.Header
	)
	api := &fakeImageAPI{
		imprt: func(src client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error) {
			if ref != images.Tag() || src.SourceName != "-" {
				t.Errorf("import ref %q from %q, want %s from -", ref, src.SourceName, images.Tag())
			}
			if !slices.Equal(opts.Changes, offlineImageChanges) {
				t.Errorf("import changes = %q, want %q", opts.Changes, offlineImageChanges)
			}
			entries := map[string]*tar.Header{}
			tr := tar.NewReader(src.Source)
			for {
				hdr, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return nil, err
				}
				entries[hdr.Name] = hdr
			}
			mu.Lock()
			imported = entries
			mu.Unlock()
			return io.NopCloser(strings.NewReader(`{"status":"sha256:0123"}`)), nil
		},
		inspect: func(ref string) (client.ImageInspectResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if imported == nil {
				return client.ImageInspectResult{}, notFound(ref)
			}
			return client.ImageInspectResult{}, nil
		},
	}

	var progress bytes.Buffer
	err := buildDefaultImage(t.Context(), api, BuildOptions{Offline: true, Progress: &progress}, false, host, &imageBuilds{})
	if err != nil {
		t.Fatalf("offline build: %v\n%s", err, progress.String())
	}

	wantArgv := []string{"/fake/debootstrap", "--variant=minbase", "--include=" + strings.Join(images.Packages(), ","),
		"bookworm", ""}
	if len(fake.argv) != len(wantArgv) {
		t.Fatalf("debootstrap argv = %q, want %q", fake.argv, wantArgv)
	}
	for i, want := range wantArgv {
		if want != "" && fake.argv[i] != want {
			t.Errorf("debootstrap argv[%d] = %q, want %q", i, fake.argv[i], want)
		}
	}

	for name, want := range map[string]bool{
		"./usr/bin/hello":                  true,
		"./usr/share/doc/pkg/copyright":    true,
		"./usr/share/doc/pkg/changelog.gz": false,
		"./usr/share/doc/alias":            false,
		"./usr/share/man/man1/":            false,
		"./usr/share/locale/escape":        false,
		"./var/lib/apt/lists/mirror.example_debian_dists_bookworm_InRelease": false,
		"./var/cache/apt/pkgcache.bin":                                       false,
		"./var/cache/apt/archives/git_1_amd64.deb":                           false,
		"./var/cache/apt/archives/partial/":                                  true,
		"./etc/dpkg/dpkg.cfg.d/docker":                                       true,
	} {
		if _, got := imported[name]; got != want {
			t.Errorf("imported tree has %s: %v, want %v", name, got, want)
		}
	}
	if root, ok := imported["./"]; !ok || root.Mode&0o777 != 0o755 || root.Uid != 0 {
		t.Errorf("imported root directory = %+v, want mode 0755 owned by root", root)
	}
	if _, err := os.Stat(outside + "/keep"); err != nil {
		t.Errorf("cleaning the tree removed a file outside it: %v", err)
	}
	for _, want := range []string{"debootstrap bookworm from debootstrap's default mirror", "I: Base system installed successfully.",
		"sha256:0123", "built " + images.Tag()} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
	assertEmptyDir(t, host.tempDir)
}

func TestBuildOfflineErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		host    func(t *testing.T, h offlineHost) offlineHost
		script  string
		env     map[string]string
		wantIs  error
		wantErr []string
	}{
		{
			name:   "not root",
			host:   func(_ *testing.T, h offlineHost) offlineHost { h.geteuid = func() int { return 1000 }; return h },
			wantIs: ErrOfflineNeedsRoot,
		},
		{
			name: "no debootstrap",
			host: func(_ *testing.T, h offlineHost) offlineHost {
				h.lookPath = func(file string) (string, error) { return "", exec.ErrNotFound }
				return h
			},
			wantIs:  ErrNoDebootstrap,
			wantErr: []string{"apt-get install debootstrap"},
		},
		{
			name: "debootstrap fails",
			script: `echo "I: Retrieving InRelease"
echo "E: Failed getting release file http://mirror.example/debian/dists/bookworm/InRelease" >&2
mkdir -p "$4/debootstrap"
echo "dpkg: error processing package git" > "$4/debootstrap/debootstrap.log"
exit 1`,
			wantErr: []string{"debootstrap bookworm from debootstrap's default mirror: exit status 1",
				"E: Failed getting release file", "debootstrap.log ends with:\ndpkg: error processing package git"},
		},
		{
			name:    "a mirror from the environment must be a URL",
			env:     map[string]string{MirrorEnv: "mirror.example"},
			wantErr: []string{"SHIRO_DEBIAN_MIRROR: debian mirror \"mirror.example\": want an http, https or file URL"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var fake fakeDebootstrapHost
			script := tt.script
			if script == "" {
				script = `echo "debootstrap should not run" >&2; exit 1`
			}
			host := fake.host(t, script, tt.env)
			if tt.host != nil {
				host = tt.host(t, host)
			}
			err := buildOffline(t.Context(), &fakeImageAPI{}, images.Tag(), "", io.Discard, host)
			if err == nil {
				t.Fatal("buildOffline() succeeded")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("buildOffline() = %v, want %v", err, tt.wantIs)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
			}
			assertEmptyDir(t, host.tempDir)
		})
	}
}

func TestBuildOfflineCancelled(t *testing.T) {
	t.Parallel()
	var fake fakeDebootstrapHost
	started := make(chan struct{})
	host := fake.host(t, `mkdir -p "$4/usr"; echo started; exec sleep 60`, nil)
	ctx, cancel := context.WithCancel(t.Context())
	progress := writerFunc(func(p []byte) {
		if strings.Contains(string(p), "started") {
			close(started)
		}
	})
	done := make(chan error)
	go func() { done <- buildOffline(ctx, &fakeImageAPI{}, images.Tag(), "", progress, host) }()
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("buildOffline() = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("buildOffline() did not return after cancellation")
	}
	assertEmptyDir(t, host.tempDir)
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

func TestDebianMirror(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opt  string
		env  string
		want string
	}{
		{name: "default: debootstrap's own", want: ""},
		{name: "environment", env: "http://mirror.local/debian", want: "http://mirror.local/debian"},
		{name: "option wins", opt: "file:///srv/debian", env: "http://mirror.local/debian", want: "file:///srv/debian"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := debianMirror(tt.opt, func(k string) string {
				if k == MirrorEnv {
					return tt.env
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("debianMirror() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLineTail(t *testing.T) {
	t.Parallel()
	var lt lineTail
	for i := range 40 {
		lt.Write([]byte(strings.Repeat("x", i%3) + "line " + string(rune('a'+i%26)) + "\r\n"))
	}
	lt.Write([]byte("partial"))
	lines := strings.Split(lt.String(), "\n")
	if len(lines) != lineTailMax+1 || lines[len(lines)-1] != "partial" {
		t.Fatalf("tail = %q, want the last %d lines and the partial one", lines, lineTailMax)
	}
	if strings.Contains(lt.String(), "\r") {
		t.Error("tail keeps carriage returns")
	}
}

// skipUnlessCI skips the test, or fails it when CI=true: in CI a missing
// dependency is a broken setup, not a reason to test less.
func skipUnlessCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// logWriter writes each line it gets to the test log.
type logWriter struct {
	t    *testing.T
	part string
}

func (w *logWriter) Write(p []byte) (int, error) {
	lines := strings.Split(w.part+string(p), "\n")
	w.part = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		w.t.Log(l)
	}
	return len(p), nil
}

// TestDockerOfflineBuildOfDefaultImageIfMissing runs against the real
// engine. When images.Tag() is missing it builds it offline (debootstrap:
// root, network to a Debian mirror and a few minutes); then it checks the
// image gives an unprivileged user bash, rg, git and curl.
func TestDockerOfflineBuildOfDefaultImageIfMissing(t *testing.T) {
	ctx := t.Context()
	api, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		skipUnlessCI(t, "docker client: %v", err)
	}
	defer api.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := api.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		skipUnlessCI(t, "no docker engine: %v", err)
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		skipUnlessCI(t, "no docker CLI to run the image with: %v", err)
	}

	tag := images.Tag()
	ok, err := imageExists(ctx, api, tag)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		if testing.Short() {
			skipUnlessCI(t, "%s is missing and building it offline takes minutes (-short)", tag)
		}
		if os.Geteuid() != 0 {
			skipUnlessCI(t, "%s is missing and building it offline needs root", tag)
		}
		start := time.Now()
		if err := buildDefaultImage(ctx, api, BuildOptions{Offline: true, Progress: &logWriter{t: t}}, false, systemHost(), &defaultImageBuilds); err != nil {
			t.Fatal(err)
		}
		t.Logf("offline build of %s took %s", tag, time.Since(start).Round(time.Second))
	}

	out, err := exec.CommandContext(ctx, docker, "run", "--rm", "--user", "65534:65534", tag,
		"bash", "-lc", `rg --version && git --version && curl --version && make --version && python3 --version && echo "LANG=$LANG"`).CombinedOutput()
	if err != nil {
		t.Fatalf("docker run %s: %v\n%s", tag, err, out)
	}
	for _, want := range []string{"ripgrep ", "git version ", "curl ", "GNU Make ", "Python 3", "LANG=C.UTF-8"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("the image's output lacks %q:\n%s", want, out)
		}
	}
}
