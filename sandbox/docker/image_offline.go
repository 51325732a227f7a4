package docker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/images"
)

// MirrorEnv names the environment variable that chooses the Debian mirror
// of an offline build; without it (and without BuildOptions.Mirror)
// debootstrap uses its own default.
const MirrorEnv = "SHIRO_DEBIAN_MIRROR"

var (
	// ErrOfflineNeedsRoot is returned by an offline build run by another
	// user than root: debootstrap creates a root-owned tree.
	ErrOfflineNeedsRoot = errors.New("the offline image build needs root (debootstrap creates a root-owned tree): run it as root, or build online")
	// ErrNoDebootstrap is returned by an offline build on a machine without
	// debootstrap.
	ErrNoDebootstrap = errors.New("debootstrap not found: install it with `apt-get install debootstrap`")
)

// offlineImageChanges are the Dockerfile instructions an imported root
// filesystem gets, as the Dockerfile's ENV and CMD lines give the online
// image.
var offlineImageChanges = []string{
	"ENV LANG=C.UTF-8",
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	`CMD ["bash"]`,
	"LABEL " + LabelBuilt + "=true",
}

// offlineHost is what an offline build needs from the machine it runs on;
// tests replace it.
type offlineHost struct {
	geteuid  func() int
	lookPath func(file string) (string, error)
	command  func(ctx context.Context, name string, args ...string) *exec.Cmd
	getenv   func(key string) string
	// tempDir is where the root filesystem is built; empty means
	// os.TempDir().
	tempDir string
}

func systemHost() offlineHost {
	return offlineHost{
		geteuid:  os.Geteuid,
		lookPath: exec.LookPath,
		command:  exec.CommandContext,
		getenv:   os.Getenv,
	}
}

// debianMirror returns the mirror an offline build uses; "" leaves the
// choice to debootstrap.
func debianMirror(opt string, getenv func(string) string) (string, error) {
	switch {
	case opt != "":
		return opt, nil
	case getenv(MirrorEnv) != "":
		m := getenv(MirrorEnv)
		if err := validateMirror(m); err != nil {
			return "", fmt.Errorf("%s: %w", MirrorEnv, err)
		}
		return m, nil
	}
	return "", nil
}

// mirrorName says where debootstrap fetches from.
func mirrorName(mirror string) string {
	if mirror == "" {
		return "debootstrap's default mirror"
	}
	return mirror
}

// buildOffline debootstraps images.Packages() into a temporary directory,
// slims the tree and imports it as tag. The directory is removed whatever
// happens.
func buildOffline(ctx context.Context, api ImageAPI, tag, mirrorOpt string, progress io.Writer, host offlineHost) (err error) {
	if host.geteuid() != 0 {
		return ErrOfflineNeedsRoot
	}
	debootstrap, err := host.lookPath("debootstrap")
	if err != nil {
		// root's PATH may lack /usr/sbin (su without -, some sudo setups).
		if debootstrap, err = host.lookPath("/usr/sbin/debootstrap"); err != nil {
			return ErrNoDebootstrap
		}
	}
	tarPath, err := host.lookPath("tar")
	if err != nil {
		return fmt.Errorf("tar not found: %w", err)
	}
	mirror, err := debianMirror(mirrorOpt, host.getenv)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp(host.tempDir, "shiro-rootfs-")
	if err != nil {
		return fmt.Errorf("create rootfs directory: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := removeRootfs(cctx, host, dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	// The tree's top directory becomes the image's /: it must be 0755, not
	// MkdirTemp's 0700, or only root could use the image.
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return fmt.Errorf("create rootfs directory: %w", err)
	}
	if err := os.Chmod(rootfs, 0o755); err != nil {
		return fmt.Errorf("create rootfs directory: %w", err)
	}

	start := time.Now()
	suite := images.DebianSuite()
	fmt.Fprintf(progress, "debootstrap %s from %s (%s)\n", suite, mirrorName(mirror), strings.Join(images.Packages(), " "))
	if err := runDebootstrap(ctx, host, debootstrap, suite, rootfs, mirror, progress); err != nil {
		return err
	}
	fmt.Fprintf(progress, "debootstrap done in %s\n", time.Since(start).Round(time.Second))
	if err := slimRootfs(rootfs); err != nil {
		return fmt.Errorf("clean rootfs: %w", err)
	}
	start = time.Now()
	if err := importRootfs(ctx, api, host, tarPath, rootfs, tag, progress); err != nil {
		return err
	}
	fmt.Fprintf(progress, "import done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func runDebootstrap(ctx context.Context, host offlineHost, path, suite, rootfs, mirror string, progress io.Writer) error {
	args := []string{"--variant=minbase", "--include=" + strings.Join(images.Packages(), ","), suite, rootfs}
	if mirror != "" {
		args = append(args, mirror)
	}
	cmd := host.command(ctx, path, args...)
	// Interrupt rather than kill on cancellation: debootstrap then unmounts
	// what it mounted in the tree.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	var tail lineTail
	cmd.Stdout = io.MultiWriter(progress, &tail)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("debootstrap: %w", ctx.Err())
		}
		msg := tail.String()
		if log, rerr := os.ReadFile(filepath.Join(rootfs, "debootstrap", "debootstrap.log")); rerr == nil {
			var lt lineTail
			lt.Write(log)
			msg += "\ndebootstrap.log ends with:\n" + lt.String()
		}
		return fmt.Errorf("debootstrap %s from %s: %w\n%s", suite, mirrorName(mirror), err, msg)
	}
	return nil
}

// lineTail keeps the last lines written to it.
type lineTail struct {
	lines []string
	part  string
}

const lineTailMax = 15

func (t *lineTail) Write(p []byte) (int, error) {
	lines := strings.Split(t.part+string(p), "\n")
	t.part = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if l = strings.TrimRight(l, "\r"); l != "" {
			t.lines = append(t.lines, l)
		}
	}
	if n := len(t.lines); n > lineTailMax {
		t.lines = slices.Clone(t.lines[n-lineTailMax:])
	}
	return len(p), nil
}

func (t *lineTail) String() string {
	lines := t.lines
	if t.part != "" {
		lines = append(slices.Clone(lines), t.part)
	}
	return strings.Join(lines, "\n")
}

// slimDpkgExcludes keeps documentation, manuals and translations out of the
// packages installed later, as in Debian's slim images (which the online
// build starts from).
const slimDpkgExcludes = `# Written by shiro's offline image build, as in Debian's slim images.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
`

// slimRootfs removes apt's package lists and caches from the tree, and
// what Debian's slim images leave out: documentation (but the copyright
// files), manuals and translations. It works through an os.Root so that no
// symlink in the tree leads it outside.
func slimRootfs(rootfs string) error {
	root, err := os.OpenRoot(rootfs)
	if err != nil {
		return err
	}
	defer root.Close()
	empty := []string{
		"var/lib/apt/lists",
		"var/cache/apt/archives",
		"usr/share/groff",
		"usr/share/info",
		"usr/share/linda",
		"usr/share/lintian/overrides",
		"usr/share/locale",
		"usr/share/man",
	}
	for _, dir := range empty {
		if err := emptyDir(root, dir, nil); err != nil {
			return err
		}
	}
	keepCopyright := func(name string, d fs.DirEntry) bool {
		return d.IsDir() && d.Type()&fs.ModeSymlink == 0
	}
	if err := emptyDir(root, "usr/share/doc", keepCopyright); err != nil {
		return err
	}
	// Only the directories the copyright files live in are left.
	docs, err := readDir(root, "usr/share/doc")
	if err != nil {
		return err
	}
	for _, d := range docs {
		if err := emptyDir(root, "usr/share/doc/"+d.Name(), func(name string, _ fs.DirEntry) bool { return name == "copyright" }); err != nil {
			return err
		}
	}
	// apt's binary caches (pkgcache.bin, srcpkgcache.bin).
	caches, err := readDir(root, "var/cache/apt")
	if err != nil {
		return err
	}
	for _, d := range caches {
		if strings.HasSuffix(d.Name(), ".bin") {
			if err := root.Remove("var/cache/apt/" + d.Name()); err != nil {
				return err
			}
		}
	}
	if err := root.MkdirAll("var/cache/apt/archives/partial", 0o755); err != nil {
		return err
	}
	if err := root.MkdirAll("etc/dpkg/dpkg.cfg.d", 0o755); err != nil {
		return err
	}
	return root.WriteFile("etc/dpkg/dpkg.cfg.d/docker", []byte(slimDpkgExcludes), 0o644)
}

// readDir lists dir inside root; a missing directory is empty.
func readDir(root *os.Root, dir string) ([]fs.DirEntry, error) {
	f, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// emptyDir removes what dir holds, but the entries keep says to keep.
func emptyDir(root *os.Root, dir string, keep func(name string, d fs.DirEntry) bool) error {
	entries, err := readDir(root, dir)
	if err != nil {
		return err
	}
	for _, d := range entries {
		if keep != nil && keep(d.Name(), d) {
			continue
		}
		if err := root.RemoveAll(dir + "/" + d.Name()); err != nil {
			return err
		}
	}
	return nil
}

// importRootfs streams the tree, as a tar archive, into the engine's image
// import and tags the result.
func importRootfs(ctx context.Context, api ImageAPI, host offlineHost, tarPath, rootfs, tag string, progress io.Writer) error {
	cmd := host.command(ctx, tarPath, "--numeric-owner", "--one-file-system", "-C", rootfs, "-c", ".")
	var stderr lineTail
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("tar rootfs: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("tar rootfs: %w", err)
	}
	src := &countingReader{r: out}
	fmt.Fprintf(progress, "importing the root filesystem as %s\n", tag)
	res, err := api.ImageImport(ctx, client.ImageImportSource{Source: src, SourceName: "-"}, tag,
		client.ImageImportOptions{Changes: offlineImageChanges, Message: "shiro offline build (debootstrap)"})
	if err == nil {
		err = decodeImageStream(res, progress)
		res.Close()
	}
	if err != nil {
		// Whatever tar still has to say goes nowhere.
		out.Close()
		cmd.Wait()
		return fmt.Errorf("import rootfs: %w", err)
	}
	// The engine may answer before reading tar's final padding: drain it
	// so that tar can exit.
	io.Copy(io.Discard, src)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("tar rootfs: %w: %s", err, stderr.String())
	}
	fmt.Fprintf(progress, "imported %d MB\n", src.n.Load()>>20)
	return nil
}

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// removeRootfs removes a build directory, first unmounting what an
// interrupted debootstrap may have left mounted in it (/proc, /sys, the
// device nodes it bind-mounts inside a container).
func removeRootfs(ctx context.Context, host offlineHost, dir string) error {
	for _, mp := range mountsUnder(dir) {
		if out, err := host.command(ctx, "umount", "-l", mp).CombinedOutput(); err != nil {
			return fmt.Errorf("unmount %s: %w: %s", mp, err, bytes.TrimSpace(out))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove rootfs directory: %w", err)
	}
	return nil
}

// mountsUnder returns the mount points under dir, deepest first. It reads
// /proc/self/mountinfo, so finds nothing where there is none.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	var mps []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescape.Replace(fields[4])
		if strings.HasPrefix(mp, dir+string(filepath.Separator)) {
			mps = append(mps, mp)
		}
	}
	slices.SortFunc(mps, func(a, b string) int { return len(b) - len(a) })
	return mps
}
