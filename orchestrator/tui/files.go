package tui

import (
	"context"
	"io/fs"
	"os"
	"sort"
	"strings"
	"unicode"

	"github.com/shiroagent/shiro/tools"
)

// Limits of the @ file picker.
const (
	fileIndexLimit = 5000
	fileMenuShown  = 8
)

// atToken finds the @ token the cursor sits in: the nearest @ before the
// cursor that starts the text or follows white space, with no white space
// between it and the cursor. It returns the token's start (the @) and the
// query after it.
func atToken(beforeCursor []rune) (start int, query string, ok bool) {
	for i := len(beforeCursor) - 1; i >= 0; i-- {
		r := beforeCursor[i]
		if unicode.IsSpace(r) {
			return 0, "", false
		}
		if r == '@' {
			if i > 0 && !unicode.IsSpace(beforeCursor[i-1]) {
				return 0, "", false // user@host, an e-mail address
			}
			return i, string(beforeCursor[i+1:]), true
		}
	}
	return 0, "", false
}

// rankFiles orders the files matching query, case-insensitively: paths
// that start with it first (so "src/" means under src/), then paths that
// contain it; within each, shorter paths first, then alphabetical. An
// empty query ranks the shallowest paths first. At most limit are returned.
func rankFiles(files []string, query string, limit int) []string {
	q := strings.ToLower(query)
	type hit struct {
		path  string
		class int // 0 prefix, 1 substring; for an empty query, the depth
	}
	var hits []hit
	for _, f := range files {
		lf := strings.ToLower(f)
		switch {
		case q == "":
			hits = append(hits, hit{f, strings.Count(f, "/")})
		case strings.HasPrefix(lf, q):
			hits = append(hits, hit{f, 0})
		case strings.Contains(lf, q):
			hits = append(hits, hit{f, 1})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.class != b.class {
			return a.class < b.class
		}
		if len(a.path) != len(b.path) {
			return len(a.path) < len(b.path)
		}
		return a.path < b.path
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.path
	}
	return out
}

// indexFiles lists the workspace's files (root) with the ignore-aware
// walker, at most fileIndexLimit of them.
func indexFiles(ctx context.Context, root *os.Root) ([]string, error) {
	var files []string
	err := tools.Walk(ctx, root, tools.WalkOptions{Limit: fileIndexLimit}, func(p string, _ fs.FileMode) error {
		files = append(files, p)
		return nil
	})
	return files, err
}
