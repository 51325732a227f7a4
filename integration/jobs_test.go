package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/shiroagent/shiro/integration/fakemodel"
	"github.com/shiroagent/shiro/integration/testenv"
)

// bgCall is a bash call that starts a background job.
func bgCall(id, command string, stdin bool) fakemodel.ToolCall {
	in := map[string]any{"command": command, "run_in_background": true}
	if stdin {
		in["stdin"] = true
	}
	return toolCall(id, "bash", in)
}

func reply(calls ...fakemodel.ToolCall) fakemodel.Reply {
	return fakemodel.Reply{ToolCalls: calls}
}

// containerProcs lists the processes of the workspace's container, seen
// from outside it (docker top), one command line each.
func (h *hostile) containerProcs(ws string) []string {
	h.t.Helper()
	return top(h.t, h.api, onlyContainer(h.t, h.api, ws))
}

func anyMatch(procs []string, needle string) bool {
	for _, p := range procs {
		if strings.Contains(p, needle) {
			return true
		}
	}
	return false
}

// TestJobs drives one headless session, as a normal user on the real
// Docker sandbox, through every job the issue names: one that exits by
// itself (state, code, and the note the model gets without asking), one
// driven through job_input (python3 -i), one that reads stdin without stdin:true (end-of-file), one
// printing 10 MiB (the ring's marker, its bound), one that forks and
// setsids and is killed (nothing of it left, checked with docker top while
// the session still runs), and one still running when the session ends
// (gone afterwards).
func TestJobs(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("jobs")

	killed := make(chan struct{})
	release := make(chan struct{})
	listed := make(chan []string, 1)
	go func() {
		select {
		case <-killed:
		case <-t.Context().Done():
			return
		}
		listed <- h.containerProcs(ws)
		close(release)
	}()

	res, reqs := h.headless(ws,
		reply(bgCall("c1", "echo first; sleep 1.5; echo last; exit 3", false)),
		reply(bgCall("c2", "python3 -u -i 2>&1", true)),
		// One string to print: python3 -u writes each argument of print
		// apart, and job_input returns what came by then.
		reply(toolCall("c3", "job_input", map[string]any{"id": "job-2", "text": "print(\"%d answered\" % (6*7))\n"})),
		reply(bgCall("c4", `read line; echo "read: $? [$line]"`, false)),
		reply(bgCall("c5", `head -c 10485760 /dev/zero | tr '\0' x; echo; echo ten-mib-done`, false)),
		reply(bgCall("c6", `(setsid sleep 1001 &); sh -c 'sleep 1002 & wait' & echo forked; sleep 1003`, false)),
		reply(bashCall("c6b", "sleep 3")),
		reply(toolCall("c7", "job_output", map[string]any{"id": "job-1", "wait": 10})),
		reply(toolCall("c8", "job_output", map[string]any{"id": "job-3", "wait": 10})),
		reply(toolCall("c9", "job_output", map[string]any{"id": "job-4", "since": 0})),
		reply(toolCall("c9b", "job_output", map[string]any{"id": "job-4", "tail": 2})),
		reply(toolCall("c10", "job_output", map[string]any{"id": "job-2", "wait": 5})),
		reply(toolCall("c11", "job_kill", map[string]any{"id": "job-5"})),
		fakemodel.Reply{Reached: killed, Hold: release, ToolCalls: []fakemodel.ToolCall{bgCall("c12", "sleep 1004", false)}},
		fakemodel.Reply{Text: "done"},
	)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}

	if got := resultOf(t, reqs, "c1"); !strings.Contains(got, "job-1 started in the background (pid ") || !strings.Contains(got, "first") {
		t.Errorf("bash run_in_background's result: %q", got)
	}
	// job-1 ended by itself while other calls ran: a later result says so,
	// once, before any job_output of it.
	notes := 0
	for _, id := range []string{"c2", "c3", "c4", "c5", "c6", "c6b"} {
		if strings.Contains(resultOf(t, reqs, id), "[job] job-1 (") {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("the note of job-1's end came %d times before c7, want once", notes)
	}
	if got := resultOf(t, reqs, "c7"); !strings.Contains(got, "job-1: exited with code 3") || !strings.Contains(got, "last") {
		t.Errorf("job_output of the job that exited: %q", got)
	}
	if got := resultOf(t, reqs, "c3"); !strings.Contains(got, "42 answered") {
		t.Errorf("job_input to python3 -i: %q", got)
	}
	if got := resultOf(t, reqs, "c8"); !strings.Contains(got, "read: 1 []") || !strings.Contains(got, "exited with code 0") {
		t.Errorf("a job reading stdin without stdin:true: %.300q", got)
	}
	got9 := resultOf(t, reqs, "c9")
	if !strings.Contains(got9, "job-4: exited with code 0") || !strings.Contains(got9, "bytes of earlier output dropped: only the last 1048576 bytes are kept") || !strings.Contains(got9, "more bytes after these: read on with since=") {
		t.Errorf("job_output of 10 MiB from 0: %.400q", got9)
	}
	if len(got9) > 30_000 {
		t.Errorf("job_output returned %d characters: more than the output cap", len(got9))
	}
	if got := resultOf(t, reqs, "c9b"); !strings.Contains(got, "ten-mib-done") {
		t.Errorf("job_output tail of the 10 MiB job: %.400q", got)
	}
	if got := resultOf(t, reqs, "c11"); !strings.Contains(got, "job-5 killed") {
		t.Errorf("job_kill: %q", got)
	}
	var during []string
	select {
	case during = <-listed:
	default:
		t.Fatal("the processes were not listed while the session ran")
	}
	for _, n := range []string{"sleep 1001", "sleep 1002", "sleep 1003"} {
		if anyMatch(during, n) {
			t.Errorf("%q outlived job_kill: %q", n, during)
			break
		}
	}
	if !anyMatch(during, "python3 -u -i") {
		t.Errorf("job-2 did not run across the calls: %q", during)
	}
	if !strings.Contains(res.stderr, "[job] job-1 exited with code 3") {
		t.Errorf("headless printed no line for job-1's end:\n%s", res.stderr)
	}
	// The session ended: every job with it, the container is left clean.
	after := h.containerProcs(ws)
	for _, n := range []string{"sleep 100", "python3 -u -i"} {
		if anyMatch(after, n) {
			t.Errorf("a job's process outlived the session: %q", after)
		}
	}
	h.noMarker()
}

// TestJobsUndoAndCopyMode: an undo while a job runs is refused until the
// job is stopped (headless: the next session has no job, so the undo
// runs; within a session, Session.PlanUndo says which jobs stop it: the
// unit tests); a job's writes after its turn ended are not the turn's;
// in copy mode a job's writes stay in the sandbox's copy and are listed
// with the turn's changes.
func TestJobsCopyMode(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("jobs-copy")
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(ws, "keep.txt"), h.uid, h.gid)
	srv := fakemodel.New(t,
		reply(bgCall("c1", "sleep 0.5; echo from-job > job.txt; echo wrote", false)),
		reply(toolCall("c2", "job_output", map[string]any{"id": "job-1", "wait": 20})),
		fakemodel.Reply{Text: "done"},
	)
	home := h.dir("shiro-home-copy", 0o700)
	env := append([]string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}, providers[0].env(srv.URL)...)
	res := h.shiro(ws, env, "-p", "--yolo", "--workspace", "copy", "go")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if got := resultOf(t, srv.Requests(), "c2"); !strings.Contains(got, "wrote") || !strings.Contains(got, "exited with code 0") {
		t.Fatalf("job_output: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "job.txt")); err == nil {
		t.Error("a job in copy mode wrote into the workspace itself")
	}
	if !strings.Contains(res.stderr, "job.txt") {
		t.Errorf("the copy's changes do not list the job's file:\n%s", res.stderr)
	}
	h.noMarker()
}

// TestHostileWithAJob replays representative attacks on the host's git,
// its hooks and /undo while a background job of the command's uid keeps
// trying to plant a hook and an fsmonitor and to swap .git for a symlink
// across turns; the host runs git throughout and after, and nothing may
// run on the host.
func TestHostileWithAJob(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("hostile-job")
	h.hookRepo(ws)
	before := gitListing(t, ws)
	planter := strings.Join([]string{
		"for i in $(seq 1 200); do",
		"printf '#!/bin/sh\\n" + h.plant("job-hook") + "\\n' > .git/hooks/pre-commit 2>/dev/null; chmod +x .git/hooks/pre-commit 2>/dev/null;",
		"git config core.fsmonitor '" + h.plant("job-fsmonitor") + "' 2>/dev/null;",
		"ln -sfn .git d 2>/dev/null; mkdir -p sub && (cd sub && git init -q 2>/dev/null; git config core.fsmonitor '" + h.plant("job-sub") + "' 2>/dev/null);",
		"sleep 0.05; done",
	}, " ")
	stop := h.gitLoop([]string{ws})
	res, reqs := h.headless(ws,
		reply(bgCall("c1", planter, false)),
		reply(toolCall("c2", "write_file", map[string]any{"path": "d/hooks/pre-commit", "content": "#!/bin/sh\n" + h.plant("write-through-link") + "\n"})),
		reply(bashCall("c3", "sleep 3; echo attacked")),
		reply(toolCall("c4", "job_output", map[string]any{"id": "job-1", "tail": 3})),
		fakemodel.Reply{Text: "done"},
	)
	stop()
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if got := resultOf(t, reqs, "c4"); !strings.Contains(got, "job-1: running") {
		t.Errorf("the planting job was not running across the calls: %q", got)
	}
	h.hostGit(ws)
	h.hostGit(filepath.Join(ws, "sub"))
	h.noMarker()
	sameGit(t, before, gitListing(t, ws))

	// An undo after the session (no job is left to race it) goes through
	// the write gate: it puts back nothing through the job's symlink.
	res = h.shiro(ws, []string{"SHIRO_HOME=" + filepath.Join(h.base, "shiro-home-"+filepath.Base(ws))}, "undo", "--yes")
	t.Logf("undo: exit %d: %s", res.code, res.stderr)
	h.hostGit(ws)
	h.noMarker()
	sameGit(t, before, gitListing(t, ws))
}

// TestJobKeepsTheContainerUpUntilTheSessionEnds: with an idle timeout far
// shorter than the session, a running job keeps its container (the
// session is open: init counts it), and once the session ended the
// container stops by itself with nothing of the job left.
func TestJobKeepsTheContainerUpUntilTheSessionEnds(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("jobs-idle")
	srv := fakemodel.New(t,
		reply(bgCall("c1", "echo up; sleep 1005", false)),
		reply(bashCall("c2", "sleep 6; echo slept")),
		reply(toolCall("c3", "job_output", map[string]any{"id": "job-1", "since": 0})),
		fakemodel.Reply{Text: "done"},
	)
	home := h.dir("shiro-home-idle", 0o700)
	env := append([]string{"SHIRO_HOME=" + home, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "SHIRO_API_KEY=", "SHIRO_MODEL=", "SHIRO_OPENAI_API="}, providers[0].env(srv.URL)...)
	res := h.shiro(ws, env, "-p", "--yolo", "--idle-timeout", "2s", "go")
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if got := resultOf(t, srv.Requests(), "c3"); !strings.Contains(got, "job-1: running") || !strings.Contains(got, "up") {
		t.Fatalf("the job did not outlive the idle timeout while the session ran: %q", got)
	}
	id := onlyContainer(t, h.api, ws)
	stopped := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		info, err := h.api.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Container.State == nil || !info.Container.State.Running {
			stopped = true
			break
		}
		if procs := top(t, h.api, id); anyMatch(procs, "sleep 1005") {
			t.Fatalf("the job outlived its session: %q", procs)
		}
	}
	if !stopped {
		t.Error("the container did not stop by itself after the session (idle timeout 2s)")
	}
}

// TestKubeJobs: on the Kubernetes backend a job runs across calls over the
// same channel, job_input reaches it, job_kill ends its whole tree (a
// setsid child included) and the session's end ends the rest: a bash of
// the next session (a fresh exec) lists the pod's processes.
func TestKubeJobs(t *testing.T) {
	t.Parallel()
	kc := testenv.RequireKube(t)
	h := newHostile(t)
	kubeconfig, _ := h.kubeconfig(kc)
	ws := h.workspace("kube-jobs")
	flags := []string{"--backend", "kubernetes", "--memory", "512m", "--cpus", "1", "--network", "none"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := h.command(ctx, ws, []string{"KUBECONFIG=" + kubeconfig}, h.bin, append([]string{"sandbox", "rm"}, flags...)...).CombinedOutput(); err != nil {
			t.Logf("shiro sandbox rm: %v: %s", err, out)
		}
	})
	srv := fakemodel.New(t,
		reply(bgCall("k1", "while read l; do echo \"got $l\"; done", true)),
		reply(toolCall("k2", "job_input", map[string]any{"id": "job-1", "text": "ping\n"})),
		reply(bgCall("k3", "(setsid sleep 1011 &); sleep 1012", false)),
		reply(toolCall("k4", "job_kill", map[string]any{"id": "job-2"})),
		reply(bashCall("k5", "ps -eo args | grep -c '[s]leep 101'")),
		fakemodel.Reply{Text: "done"},
	)
	env := append(providers[0].env(srv.URL), "KUBECONFIG="+kubeconfig, "SHIRO_HOME="+h.dir("shiro-home-kube", 0o700))
	res := h.shiro(ws, env, append(append([]string{"-p", "--yolo"}, flags...), "go")...)
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	reqs := srv.Requests()
	if got := resultOf(t, reqs, "k1"); !strings.Contains(got, "job-1 started in the background (pid ") {
		t.Errorf("bash run_in_background on the pod: %q", got)
	}
	if got := resultOf(t, reqs, "k2"); !strings.Contains(got, "got ping") {
		t.Errorf("job_input on the pod: %q", got)
	}
	if got := resultOf(t, reqs, "k4"); !strings.Contains(got, "job-2 killed") {
		t.Errorf("job_kill on the pod: %q", got)
	}
	if got := resultOf(t, reqs, "k5"); !strings.Contains(got, "stdout:\n0") {
		t.Errorf("a process of the killed job is left in the pod: %q", got)
	}

	// The next session finds nothing of the first one's jobs.
	srv2 := fakemodel.New(t,
		reply(bashCall("n1", "ps -eo args | grep -c '[w]hile read l' || true")),
		fakemodel.Reply{Text: "done"},
	)
	env = append(providers[0].env(srv2.URL), "KUBECONFIG="+kubeconfig, "SHIRO_HOME="+h.dir("shiro-home-kube", 0o700))
	res = h.shiro(ws, env, append(append([]string{"-p", "--yolo"}, flags...), "look")...)
	if res.code != 0 {
		t.Fatalf("second session: exit %d\nstderr: %s", res.code, res.stderr)
	}
	if got := resultOf(t, srv2.Requests(), "n1"); !strings.Contains(got, "stdout:\n0") {
		t.Errorf("a job of the first session outlived it in the pod: %q", got)
	}
}

// TestTUIJobs: in the chat UI a job that connects after its turn ended is
// asked about by name ("job-1: <command>", from the host's own list of
// what runs), /jobs lists it running and kills it from its choice, and the
// end is a notice line.
func TestTUIJobs(t *testing.T) {
	t.Parallel()
	api := testenv.RequireDocker(t)
	testenv.RequireImage(t, api)
	requireTmux(t)
	ws := testenv.Workspace(t, api)
	ip := remoteServer(t, token(t, "job-host"))
	command := "sleep 3; curl -sS -m 100 http://" + ip + ":8080/; sleep 1021"
	srv := fakemodel.New(t,
		reply(bgCall("jb1", command, false)),
		fakemodel.Reply{Text: "Started the job."},
	)
	env := append(headlessEnv(t, providers[0], srv.URL), "TERM=xterm-256color")
	s := newTmux(t, ws, tuiWidth, tuiHeight, env, testenv.Binary(t), "--yolo")
	s.run("set-option", "-t", s.name, "remain-on-exit", "on")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen at the end:\n%s", s.screen())
		}
	})
	s.waitFor("sandbox ready", 2*time.Minute)
	s.keys("start it", true)
	s.waitFor("Started the job.", 30*time.Second)
	scr := s.waitFor("the sandbox wants to connect to "+ip+":8080", 30*time.Second)
	if !strings.Contains(scr, "bash: job-1: sleep 3; curl") {
		t.Errorf("the ask does not name the job:\n%s", scr)
	}
	s.waitFor("y allow once | a always for this project | n deny | d always deny", 5*time.Second)
	s.keys("n", false)
	s.waitGone("wants to connect", 10*time.Second)

	// An undo while the job runs asks to stop it first.
	s.keys("/undo", true)
	s.waitFor("Background jobs are running: job-1 (sleep 3; curl", 10*time.Second)
	s.waitFor("up/down move | enter choose", 5*time.Second)
	s.press("Escape")
	s.waitFor("undo cancelled", 5*time.Second)

	s.keys("/jobs", true)
	scr = s.waitFor("Kill a background job?", 10*time.Second)
	for _, want := range []string{"/jobs: 1 job(s)", "job-1", "running", "Kill job-1 (sleep 3; curl"} {
		if !strings.Contains(scr, want) {
			t.Errorf("/jobs lacks %q:\n%s", want, scr)
		}
	}
	s.waitFor("up/down move | enter choose", 5*time.Second) // the form takes keys
	s.press("Enter")
	s.waitFor("job-1 killed", 20*time.Second)
	id := onlyContainer(t, api, ws)
	if procs := top(t, api, id); anyMatch(procs, "sleep 1021") {
		t.Errorf("the killed job's process is left: %q", procs)
	}
	// With no job left, the undo goes straight to its plan.
	s.keys("/undo", true)
	scr = s.waitFor("and rewind the conversation?", 10*time.Second)
	if strings.Contains(scr, "Background jobs are running") {
		t.Errorf("the undo still asks about the killed job:\n%s", scr)
	}
	s.waitFor("up/down move | enter choose", 5*time.Second)
	s.press("Escape")
	s.waitFor("undo cancelled", 5*time.Second)
	s.quit()
}

// TestHostileJobCannotReachTheHelpers: the ptracer attack on PID 1, serve,
// forward and the reapers, run as a background job that lives across
// calls (the hijacker) and probed from a second job: the command's uid
// reaches none of them, and what the next command runs is its own.
func TestHostileJobCannotReachTheHelpers(t *testing.T) {
	t.Parallel()
	h := newHostile(t)
	ws := h.workspace("job-helpers")
	h.repo(ws)
	p := h.ptracer(ws)
	res, reqs := h.headless(ws,
		reply(bgCall("j1", p+" hijack 8s /tmp/hijack.log", false)),
		reply(bashCall("j2", "sleep 1; echo mine")),
		reply(bgCall("j3", p+" probe", false)),
		reply(toolCall("j4", "job_output", map[string]any{"id": "job-2", "since": 0, "wait": 20})),
		reply(bashCall("j5", "sleep 1; echo mine again; cat /tmp/hijack.log")),
		fakemodel.Reply{Text: "done"},
	)
	if res.code != 0 {
		t.Fatalf("exit %d\nstderr: %s", res.code, res.stderr)
	}
	for _, id := range []string{"j2", "j5"} {
		if got := resultOf(t, reqs, id); strings.Contains(got, "HIJACKED") || !strings.Contains(got, "mine") || strings.Contains(got, "wrote into fd3") {
			t.Errorf("%s's result is not its own:\n%s", id, got)
		}
	}
	report := resultOf(t, reqs, "j4")
	seen := 0
	for _, line := range strings.Split(report, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[2], "attach=") {
			continue
		}
		seen++
		for _, probe := range f[2:] {
			if strings.HasSuffix(probe, "=ok") || strings.Contains(probe, "=ok:") {
				t.Errorf("a job reached helper %s (pid %s): %s", f[1], f[0], line)
			}
		}
	}
	if seen == 0 {
		t.Errorf("the probe job reported no helper process:\n%s", report)
	}
	h.hostGit(ws)
	h.noMarker()
}
