// Package images holds the Dockerfile of shiro's default sandbox image and
// what is derived from it: the image tag (a hash of the Dockerfile, so that
// any change to it means a rebuild), the Debian suite it starts from and the
// packages it installs. The Dockerfile is the single source of truth for both
// the online build (docker build) and the offline one (debootstrap).
package images

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Repository is the repository part of the default image's tag.
const Repository = "shiro-sandbox"

//go:embed default/Dockerfile
var dockerfile []byte

var (
	tag      = sync.OnceValue(func() string { return tagFor(dockerfile) })
	packages = sync.OnceValue(func() []string { return must(parsePackages(dockerfile)) })
	suite    = sync.OnceValue(func() string { return must(parseSuite(dockerfile)) })
)

// Dockerfile returns the default image's Dockerfile.
func Dockerfile() []byte { return bytes.Clone(dockerfile) }

// Tag returns the default image's tag: "shiro-sandbox:" followed by the first
// 12 hex digits of the Dockerfile's SHA-256.
func Tag() string { return tag() }

// Packages returns the Debian packages the Dockerfile's apt-get install line
// names, in order.
func Packages() []string { return append([]string(nil), packages()...) }

// DebianSuite returns the Debian release the Dockerfile starts from
// ("bookworm" for FROM debian:bookworm-slim).
func DebianSuite() string { return suite() }

func tagFor(df []byte) string {
	sum := sha256.Sum256(df)
	return Repository + ":" + hex.EncodeToString(sum[:])[:12]
}

// must is for values parsed from the embedded Dockerfile: a test makes sure
// they parse, so a failure here is a broken build, like regexp.MustCompile.
func must[T any](v T, err error) T {
	if err != nil {
		panic("images: embedded Dockerfile: " + err.Error())
	}
	return v
}

// instructions returns the Dockerfile's instructions, one per logical line
// (backslash continuations joined, comments and blank lines dropped).
func instructions(df []byte) []string {
	var (
		out []string
		cur strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(df))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body)
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// parsePackages returns the package names of the first "apt-get install" in
// a RUN instruction: the words after "install" that are not options, up to
// the end of that shell command.
func parsePackages(df []byte) ([]string, error) {
	for _, ins := range instructions(df) {
		fields := strings.Fields(ins)
		if len(fields) == 0 || !strings.EqualFold(fields[0], "RUN") {
			continue
		}
		for i := 1; i+1 < len(fields); i++ {
			if fields[i] != "apt-get" || fields[i+1] != "install" {
				continue
			}
			var pkgs []string
			for _, f := range fields[i+2:] {
				end := strings.HasSuffix(f, ";")
				f = strings.TrimSuffix(f, ";")
				if f == "&&" || f == "||" || f == "|" {
					break
				}
				if f != "" && !strings.HasPrefix(f, "-") {
					pkgs = append(pkgs, f)
				}
				if end {
					break
				}
			}
			if len(pkgs) == 0 {
				return nil, errors.New("apt-get install names no package")
			}
			return pkgs, nil
		}
	}
	return nil, errors.New("no RUN apt-get install line")
}

// parseSuite returns the suite of the Dockerfile's first FROM debian:<suite>
// or debian:<suite>-slim.
func parseSuite(df []byte) (string, error) {
	for _, ins := range instructions(df) {
		fields := strings.Fields(ins)
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		image := fields[1]
		if strings.HasPrefix(image, "--") && len(fields) > 2 {
			image = fields[2]
		}
		name, ref, ok := strings.Cut(image, ":")
		if !ok || (name != "debian" && name != "docker.io/library/debian") {
			return "", fmt.Errorf("base image %q is not debian:<suite>", image)
		}
		ref, _, _ = strings.Cut(ref, "@")
		return strings.TrimSuffix(ref, "-slim"), nil
	}
	return "", errors.New("no FROM line")
}
