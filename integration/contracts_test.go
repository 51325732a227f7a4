package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// seedHeadlessTools are the tools the seed offers a headless run: its 14
// built-ins and the session and plugin tools. Tools added since (the job_*
// tools, publish_port) are counted apart.
var seedHeadlessTools = []string{
	"read_file", "write_file", "edit_file", "glob", "grep", "bash",
	"git_status", "git_diff", "git_log", "git_show", "git_blame",
	"multi_edit", "list_dir", "read_many_files",
	"todo_write", "remember", "recall", "forget", "skill", "task", "current_time",
}

// toolWireSizes returns the size of each tool's JSON as the request body
// carries it, byte for byte, by name.
func toolWireSizes(t *testing.T, body []byte) map[string]int {
	t.Helper()
	var req struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, raw := range req.Tools {
		var tool struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		out[tool.Name+tool.Function.Name] = len(raw)
	}
	return out
}

// TestSeedToolSchemasFitTheirBudget holds the wire cost of the seed's 21
// headless tools (names, descriptions and schemas, as each provider's
// request carries them) at 10,000 characters or less.
func TestSeedToolSchemasFitTheirBudget(t *testing.T) {
	t.Parallel()
	const budget = 10000
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := fakemodel.New(t, fakemodel.Reply{Text: "hi"})
			res := shiro(t, t.TempDir(), headlessEnv(t, p, srv.URL), "-p", "--no-sandbox", "hi")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			req := modelRequests(srv)[0]
			body := req.JSON()
			sizes := toolWireSizes(t, req.Body)
			total := 0
			var report []string
			for _, n := range seedHeadlessTools {
				size, ok := sizes[n]
				if !ok {
					t.Errorf("the headless request does not offer %s (it offers %s)", n, strings.Join(p.tools(body), ","))
					continue
				}
				total += size
				report = append(report, fmt.Sprintf("%s=%d", n, size))
			}
			var later []string
			for n := range sizes {
				if !slices.Contains(seedHeadlessTools, n) {
					later = append(later, fmt.Sprintf("%s=%d", n, sizes[n]))
				}
			}
			slices.Sort(later)
			t.Logf("seed tools: %d characters (%s); counted apart: %s", total, strings.Join(report, " "), strings.Join(later, " "))
			if total > budget {
				t.Errorf("the seed's %d headless tools cost %d characters on the wire, want at most %d: %s", len(seedHeadlessTools), total, budget, strings.Join(report, " "))
			}
		})
	}
}
