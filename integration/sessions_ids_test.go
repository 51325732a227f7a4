package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// Sessions started in the same second share the clock part of their ids:
// shiro sessions shows each the shortest prefix unique among the saved
// sessions (at least 8 characters), -r takes that prefix back, and the
// shared 8 characters list the candidates instead of resuming one.
func TestSessionIDsOfTheSameSecond(t *testing.T) {
	t.Parallel()
	p := providers[0]
	home := t.TempDir()
	ws := t.TempDir()
	env := func(url string) []string { return append(headlessEnv(t, p, url), "SHIRO_HOME="+home) }

	// Three sessions at once: their UUIDv7 ids begin with the same
	// millisecond clock, so at least their first 8 characters agree.
	prompts := []string{"first task", "second task", "third task"}
	var wg sync.WaitGroup
	results := make([]result, len(prompts))
	for i, prompt := range prompts {
		srv := fakemodel.New(t, fakemodel.Reply{Text: "done " + prompt})
		wg.Go(func() { results[i] = shiro(t, ws, env(srv.URL), "-p", "--no-sandbox", prompt) })
	}
	wg.Wait()
	for i, res := range results {
		if res.code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, res.code, res.stderr)
		}
	}
	files, _ := filepath.Glob(filepath.Join(home, "sessions", "*.json"))
	if len(files) != 3 {
		t.Fatalf("%d session files, want 3", len(files))
	}
	titleOf := map[string]string{} // full id -> title
	for _, f := range files {
		var rec struct{ ID, Title string }
		data, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(data, &rec) != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		titleOf[rec.ID] = rec.Title
	}

	res := shiro(t, ws, env("http://127.0.0.1:1"), "sessions")
	if res.code != 0 {
		t.Fatalf("shiro sessions: exit %d: %s", res.code, res.stderr)
	}
	shown := map[string]string{} // full id -> shown id
	row := regexp.MustCompile(`^([0-9a-f-]+)\s`)
	for line := range strings.Lines(res.stdout) {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var id string
		for full := range titleOf {
			if strings.HasPrefix(full, m[1]) {
				if id != "" {
					t.Errorf("shown id %s is a prefix of two sessions:\n%s", m[1], res.stdout)
				}
				id = full
			}
		}
		if id == "" || len(m[1]) < 8 || !strings.Contains(line, titleOf[id]) {
			t.Errorf("row %q: shown id %q names no session of that title", line, m[1])
			continue
		}
		shown[id] = m[1]
	}
	if len(shown) != 3 {
		t.Fatalf("shiro sessions shows %d distinct sessions, want 3:\n%s", len(shown), res.stdout)
	}
	// Three ids made within a second: two at least share their first 8
	// characters (the clock prefix lasts about 65 s).
	count := map[string]int{}
	for id := range shown {
		count[id[:8]]++
	}
	var sharedEight string
	for eight, n := range count {
		if n > 1 {
			sharedEight = eight
		}
	}
	if sharedEight == "" {
		t.Fatalf("no two of %v share their first 8 characters", shown)
	}
	for id, short := range shown {
		if id[:8] == sharedEight && len(short) <= 8 {
			t.Errorf("%s is shown as %s although the 8 characters are shared:\n%s", id, short, res.stdout)
		}
	}

	// Every shown id resumes its own session.
	for id, short := range shown {
		srv := fakemodel.New(t, fakemodel.Reply{Text: "resumed"})
		res := shiro(t, ws, env(srv.URL), "-r", short, "-p", "--no-sandbox", "and more")
		if res.code != 0 {
			t.Fatalf("-r %s: exit %d: %s", short, res.code, res.stderr)
		}
		var rec struct{ Messages []json.RawMessage }
		data, _ := os.ReadFile(filepath.Join(home, "sessions", id+".json"))
		if json.Unmarshal(data, &rec) != nil || len(rec.Messages) != 4 {
			t.Errorf("-r %s did not continue %s: %d messages", short, id, len(rec.Messages))
		}
	}

	// The shared first 8 characters are ambiguous: exit 1 and the
	// candidates listed by the ids that name them.
	res = shiro(t, ws, env("http://127.0.0.1:1"), "-r", sharedEight, "-p", "--no-sandbox", "which?")
	if res.code != 1 || !strings.Contains(res.stderr, `session id "`+sharedEight+`" is ambiguous`) {
		t.Fatalf("-r %s: exit %d, stderr %q", sharedEight, res.code, res.stderr)
	}
	for id, short := range shown {
		if id[:8] == sharedEight && !strings.Contains(res.stderr, "  "+short+"  ") {
			t.Errorf("the ambiguity does not list %s as %s:\n%s", id, short, res.stderr)
		}
	}
}
