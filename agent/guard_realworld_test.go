package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/shiroagent/shiro/agent"
)

// realWorldWhy is what a refusal of each class must say.
var realWorldWhy = map[string]string{
	"flag-expansion":     "an unquoted expansion that may be an option",
	"rm":                 "recursive or forced rm",
	"find-delete":        "find -delete deletes",
	"find-rm":            "find -exec rm deletes",
	"rsync":              "rsync --delete deletes",
	"rsync-remove":       "rsync --remove-source-files deletes",
	"shred":              "shred overwrites",
	"disk":               "writes onto a disk device",
	"truncate":           "truncate to size 0",
	"mv-device":          "mv onto a device",
	"mv-home":            "mv of / or a home directory",
	"tar-disk":           "writes onto a disk device",
	"kill":               "kill -1 signals every process",
	"crontab":            "crontab -r deletes",
	"own-outside":        "-R on",
	"git-checkout":       "git checkout of paths discards",
	"git-checkout-force": "git checkout --force discards",
	"git-restore":        "git restore without --staged discards",
	"git-stash":          "deletes stashed work",
	"git-reflog":         "git reflog expire --expire=now drops",
	"git-filter-branch":  "git filter-branch --force rewrites",
	"git-worktree":       "git worktree remove --force deletes",
	"code-shell":         "code runs the shell command",
	"code-deletes":       "code deletes a directory tree",
	"download-run":       "which it has just downloaded",
	"shutdown":           "shuts the machine down",
	"mkfs":               "formats a filesystem",
}

type realWorldCase struct {
	verdict, class, command string
	line                    int
}

func readRealWorld(t testing.TB) []realWorldCase {
	t.Helper()
	f, err := os.Open("testdata/guard/realworld.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []realWorldCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verdict, rest, _ := strings.Cut(line, " ")
		class, command, _ := strings.Cut(strings.TrimSpace(rest), " ")
		out = append(out, realWorldCase{verdict, class, strings.TrimSpace(command), n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The workspace the table's commands start in.
const realWorldWorkspace = "/home/dev/project"

// TestGuardRealWorld checks the guard on command lines written the way
// real ones are (testdata/guard/realworld.txt): destructive ones in every
// class issue 31 found passing, and read-only, cancelling and ordinary
// ones it refused or must go on allowing.
func TestGuardRealWorld(t *testing.T) {
	t.Parallel()
	cases := readRealWorld(t)
	refused, allowed := 0, 0
	for _, c := range cases {
		switch c.verdict {
		case "refuse", "yolo":
			refused++
		case "allow":
			allowed++
		default:
			t.Fatalf("line %d: verdict %q, want refuse, yolo or allow", c.line, c.verdict)
		}
	}
	if refused < 60 || allowed < 40 {
		t.Fatalf("the table has %d refused and %d allowed commands, want at least 60 and 40", refused, allowed)
	}
	for _, c := range cases {
		t.Run(c.class+"/"+c.command, func(t *testing.T) {
			t.Parallel()
			attended := agent.GuardReasonIn(realWorldWorkspace, c.command, false)
			unattended := agent.GuardReasonIn(realWorldWorkspace, c.command, true)
			want := realWorldWhy[c.class]
			check := func(mode, got string, refuse bool) {
				t.Helper()
				switch {
				case !refuse && got != "":
					t.Errorf("line %d, %s: refused %q: %s", c.line, mode, c.command, got)
				case refuse && got == "":
					t.Errorf("line %d, %s: allowed %q, want refused (%s)", c.line, mode, c.command, want)
				case refuse && !strings.Contains(got, want):
					t.Errorf("line %d, %s: %q refused with %s, want %q", c.line, mode, c.command, got, want)
				}
			}
			if c.verdict != "allow" && want == "" {
				t.Fatalf("line %d: class %q has no reason in realWorldWhy", c.line, c.class)
			}
			check("attended", attended, c.verdict == "refuse")
			check("unattended (--yolo)", unattended, c.verdict != "allow")
		})
	}
}

// TestGuardWorkspace checks chmod and chown -R against the workspace: a
// path inside it is ordinary, one outside refused, and without a known
// workspace every absolute path counts as outside.
func TestGuardWorkspace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		workspace, command string
		refused            bool
	}{
		{"/work/app", "chmod -R u+w /work/app/build", false},
		{"/work/app", "chmod -R u+w /work/app", false},
		{"/work/app", "chmod -R u+w /work/application", true},
		{"/work/app", "chmod -R u+w /work", true},
		{"/work/app", "cd build && chmod -R u+w .", false},
		{"/work/app", "cd /tmp && chmod -R u+w .", true},
		{"/work/app", "cd && chown -R me .", true},
		{"/work/app", "chown -R me: ./data ../data", true},
		{"", "chmod -R u+w /work/app/build", true},
		{"", "chmod -R u+w build", false},
		{"/work/app", "chmod u+w /etc/hosts", false},
	} {
		got := agent.GuardReasonIn(c.workspace, c.command, false)
		if (got != "") != c.refused {
			t.Errorf("workspace %q, %q: refused=%v (%s), want %v", c.workspace, c.command, got != "", got, c.refused)
		}
	}
	// The session's plugins carry the workspace to the guard.
	input, _ := json.Marshal(map[string]string{"command": "chmod -R u+w /work/app/build"})
	call := agent.ToolCall{Name: "bash", Input: input, Unattended: true}
	in, _ := agent.BuiltinsIn("/work/app", []string{agent.PluginGuard})
	if why, err := in[0].BeforeToolCall(context.Background(), call); why != "" || err != nil {
		t.Errorf("the guard of a session in /work/app refused %s: %s %v", input, why, err)
	}
	if why, _ := agent.GuardPlugin().BeforeToolCall(context.Background(), call); why == "" {
		t.Errorf("the guard without a workspace allowed %s", input)
	}
}

// BenchmarkGuardRealWorld measures the guard over the table, per command.
func BenchmarkGuardRealWorld(b *testing.B) {
	cases := readRealWorld(b)
	for b.Loop() {
		for _, c := range cases {
			agent.GuardReasonIn(realWorldWorkspace, c.command, true)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(cases))/1000, "µs/command")
}
