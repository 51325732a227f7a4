package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/shiroagent/shiro/agent/shellcmd"
)

// GuardPlugin refuses destructive bash commands. --yolo does not reach it.
// It does not know the workspace: every absolute path counts as outside it.
func GuardPlugin() Plugin { return GuardPluginIn("") }

// GuardPluginIn is GuardPlugin for a workspace: the directory bash starts
// in, at the same path inside the sandbox. chmod -R and chown -R inside it
// are ordinary; outside it they are refused.
func GuardPluginIn(workspace string) Plugin {
	return Plugin{
		Name:        PluginGuard,
		Description: "refuses destructive shell commands (rm -rf, force pushes, disk writes, fork bombs, curl | sh)",
		BeforeToolCall: func(_ context.Context, call ToolCall) (string, error) {
			if call.Name != "bash" {
				return "", nil
			}
			var in struct {
				Command string `json:"command"`
			}
			if err := json.Unmarshal(call.Input, &in); err != nil || in.Command == "" {
				return "", nil
			}
			return GuardReasonIn(workspace, in.Command, call.Unattended), nil
		},
		Appendix: "The guard plugin refuses destructive shell commands. When it refuses one, do not work around it (other spellings, scripts, other tools): tell the user what you wanted to run and why, and let them decide.",
	}
}

// GuardReason returns why the guard refuses a bash command that a person
// approves before it runs, or "".
func GuardReason(command string) string { return GuardReasonIn("", command, false) }

// GuardReasonUnattended returns why the guard refuses a bash command that
// runs without anyone approving it (--yolo, or bash allowed for the
// session), or "". On top of GuardReason's refusals it refuses what cannot
// be checked: a command it cannot parse, a command name or shell code only
// known when it runs, and rm given an unquoted expansion among its options.
func GuardReasonUnattended(command string) string { return GuardReasonIn("", command, true) }

// GuardReasonIn returns why the guard refuses a bash command that starts in
// workspace ("" when it is not known), unattended or not, or "".
func GuardReasonIn(workspace, command string, unattended bool) string {
	j := &judge{unattended: unattended}
	if workspace != "" {
		j.workspace = path.Clean(workspace)
	}
	why := j.why(command)
	if why == "" {
		return ""
	}
	shown := command
	if utf8.RuneCountInString(shown) > refusalShown {
		shown = string([]rune(shown)[:refusalShown])
	}
	return fmt.Sprintf("refusing %q (%s). Ask the user to run it themselves if it is really needed.", shown, why)
}

// The reasons.
const (
	whyRm        = "recursive or forced rm"
	whyReset     = "git reset --hard discards work"
	whyClean     = "git clean -f deletes untracked files"
	whyPush      = "force push rewrites shared history"
	whyBranch    = "git branch -D deletes unmerged work"
	whySQL       = "destructive SQL"
	whyMkfs      = "formats a filesystem"
	whyDd        = "dd onto a device"
	whyDisk      = "writes onto a disk device"
	whyChmod     = "chmod 777 opens files to everyone"
	whyShutdown  = "shuts the machine down"
	whyForkBomb  = "fork bomb"
	whyDownload  = "pipes a download into a shell"
	whyDynamic   = "what it runs is only known when it runs, and no one approves this call"
	whyRmUnknown = "rm is given %s, an unquoted expansion that may be an option such as -rf when it runs, and no one approves this call; quoted (\"$f\") or after -- it is a file name"
	whyUnparsed  = "it could not be parsed (%v), and no one approves this call"
	whyTooDeep   = "it is too large or too deeply nested to check: %v"
	refusalShown = 120
)

// judge applies the rules to one command line. Some rules read the line
// as a whole: a cd that leaves the workspace, a file downloaded before it
// runs.
type judge struct {
	workspace  string
	unattended bool
	// depth counts the levels of interpreter code around the line
	// (python3 -c "os.system('…')").
	depth int
	// left says a cd earlier on the line may have left the workspace.
	left bool
	// downloaded are the base names of the files curl or wget wrote
	// earlier on the line.
	downloaded []string
}

// why applies the rules to every command the line would run. What the
// parser read before an error counts: bash runs it before it reaches the
// error.
func (j *judge) why(command string) string {
	script, err := shellcmd.Parse(command)
	for _, c := range script.Commands {
		if why := j.commandWhy(c); why != "" {
			return why
		}
	}
	for _, r := range script.Redirects {
		if r.Writes() && isDisk(r.Target) {
			return whyDisk
		}
	}
	if err != nil && shellcmd.IsLimit(err) {
		return fmt.Sprintf(whyTooDeep, err)
	}
	if !j.unattended {
		return ""
	}
	if err != nil {
		return fmt.Sprintf(whyUnparsed, err)
	}
	for _, c := range script.Commands {
		if c.Name == "" || (c.Name == "git" && gitSubcommandDynamic(c.Args)) {
			return whyDynamic
		}
		if c.Name == "rm" {
			if w, ok := optionUnknown(c.Args); ok {
				return fmt.Sprintf(whyRmUnknown, w.Text)
			}
		}
	}
	return ""
}

// commandWhy applies the rules to one command, in the order the line runs
// them.
func (j *judge) commandWhy(c *shellcmd.Command) string {
	if why := j.lineWhy(c); why != "" {
		return why
	}
	if why := commandWhy(c); why != "" {
		return why
	}
	if why := j.extendedWhy(c); why != "" {
		return why
	}
	if runsSQL(c) {
		return whySQL
	}
	return ""
}

// commandWhy applies the spec's rules to one command (SQL aside).
func commandWhy(c *shellcmd.Command) string {
	if runsDownload(c) {
		return whyDownload
	}
	if c.Func != "" && c.Name == c.Func && (c.Background || c.Piped) {
		return whyForkBomb
	}
	args := c.Args
	switch name := c.Name; {
	case name == "rm":
		if rmForced(args) {
			return whyRm
		}
	case name == "git":
		if why := gitWhy(args); why != "" {
			return why
		}
	case name == "mkfs.erofs" || name == "mkfs.cramfs":
		if imageOntoDevice(name, args) {
			return whyMkfs
		}
	case name == "mkfs" || name == "mke2fs" || strings.HasPrefix(name, "mkfs."):
		return whyMkfs
	case name == "dd":
		for _, a := range args[1:] {
			if v, ok := strings.CutPrefix(static(a), "of="); ok && isDevice(v) {
				return whyDd
			}
		}
	case diskWriters[name]:
		if diskWritten(name, args) {
			return whyDisk
		}
	case name == "chmod":
		if chmodOpen(args) {
			return whyChmod
		}
	case name == "shutdown" || name == "reboot" || name == "halt" || name == "poweroff":
		if name != "shutdown" || !shutdownCancels(args) {
			return whyShutdown
		}
	case name == "systemctl":
		if whenCancel(args) {
			break
		}
		for _, a := range args[1:] {
			switch a.Text {
			case "poweroff", "reboot", "halt", "kexec":
				return whyShutdown
			}
		}
	case name == "init" || name == "telinit":
		if len(args) == 2 && (args[1].Text == "0" || args[1].Text == "6") {
			return whyShutdown
		}
	}
	return ""
}

// static is the part of a word known before the command runs.
func static(w shellcmd.Word) string {
	if w.Dynamic {
		return w.Prefix
	}
	return w.Text
}

// options returns the words before "--" (option words and operands alike:
// GNU tools take options after operands too).
func options(args []shellcmd.Word) []shellcmd.Word {
	for i, a := range args {
		if a.Text == "--" {
			return args[:i]
		}
	}
	return args
}

// shortFlag reports a cluster of short options (-rf) holding one of
// letters; stop letters take a value, so the cluster ends there.
func shortFlag(w shellcmd.Word, letters, stop string) bool {
	t := static(w)
	if len(t) < 2 || t[0] != '-' || t[1] == '-' {
		return false
	}
	for i := 1; i < len(t); i++ {
		if strings.IndexByte(letters, t[i]) >= 0 {
			return true
		}
		if strings.IndexByte(stop, t[i]) >= 0 {
			return false
		}
	}
	return false
}

// longFlag reports a long option that names one of names, abbreviated to
// at least min letters (GNU and git accept unambiguous abbreviations).
func longFlag(w shellcmd.Word, minLen int, names ...string) bool {
	t, ok := strings.CutPrefix(static(w), "--")
	if !ok || t == "" {
		return false
	}
	t, _, _ = strings.Cut(t, "=")
	for _, n := range names {
		if strings.HasPrefix(t, n) || (len(t) >= minLen && strings.HasPrefix(n, t)) {
			return true
		}
	}
	return false
}

func rmForced(args []shellcmd.Word) bool {
	for _, a := range options(args[1:]) {
		if shortFlag(a, "rRf", "") || longFlag(a, 1, "recursive", "force", "no-preserve-root") {
			return true
		}
	}
	return false
}

// gitSplit skips git's global options and returns the subcommand's index.
func gitSplit(args []shellcmd.Word) int {
	i := 1
	for i < len(args) {
		t := args[i].Text
		switch {
		case t == "-C" || t == "-c" || t == "--git-dir" || t == "--work-tree" || t == "--namespace" || t == "--config-env" || t == "--super-prefix":
			i += 2
		case strings.HasPrefix(t, "-") && !(args[i].Dynamic && args[i].Prefix == ""):
			i++
		default:
			return i
		}
	}
	return i
}

func gitSubcommandDynamic(args []shellcmd.Word) bool {
	i := gitSplit(args)
	return i < len(args) && args[i].Dynamic
}

func gitWhy(args []shellcmd.Word) string {
	i := gitSplit(args)
	if i >= len(args) {
		return ""
	}
	sub, rest := args[i].Text, options(args[i+1:])
	switch sub {
	case "reset":
		for _, a := range rest {
			if longFlag(a, 1, "hard") {
				return whyReset
			}
		}
	case "clean":
		for _, a := range rest {
			if shortFlag(a, "f", "e") || longFlag(a, 1, "force") {
				return whyClean
			}
		}
	case "push":
		for _, a := range args[i+1:] {
			if shortFlag(a, "f", "o") || longFlag(a, 3, "force", "mirror") || (!strings.HasPrefix(a.Text, "-") && strings.HasPrefix(static(a), "+")) {
				return whyPush
			}
		}
	case "branch":
		del, force := false, false
		for _, a := range rest {
			if shortFlag(a, "D", "") {
				return whyBranch
			}
			del = del || shortFlag(a, "d", "") || longFlag(a, 3, "delete")
			force = force || shortFlag(a, "f", "") || longFlag(a, 4, "force")
		}
		if del && force {
			return whyBranch
		}
	}
	return ""
}

// chmodOpen reports chmod 777 (0777, a=rwx, …), with any flags.
func chmodOpen(args []shellcmd.Word) bool {
	for i := 1; i < len(args); i++ {
		t := args[i].Text
		if t == "--" {
			if i+1 < len(args) {
				return worldOpen(args[i+1])
			}
			return false
		}
		if strings.HasPrefix(t, "-") && !worldOpen(args[i]) {
			continue
		}
		return worldOpen(args[i])
	}
	return false
}

var modeOpen = regexp.MustCompile(`^(?:0*777|(?:a|ugo|ogu|uog|gou)[+=]rwx[st]*)$`)

func worldOpen(w shellcmd.Word) bool { return !w.Dynamic && modeOpen.MatchString(w.Text) }

// isDevice reports a path under /dev that is not a harmless pseudo-device.
func isDevice(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	p = path.Clean(p)
	rest, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return false
	}
	switch rest {
	case "null", "zero", "stdout", "stderr", "stdin", "tty", "full", "random", "urandom":
		return false
	}
	return !strings.HasPrefix(rest, "fd/") && !strings.HasPrefix(rest, "pts/") && !strings.HasPrefix(rest, "shm/")
}

// Programs that write onto a disk named as an operand; diskWritten says
// which of their forms write.
var diskWriters = map[string]bool{
	"tee": true, "cp": true, "shred": true, "wipefs": true, "blkdiscard": true, "mkswap": true,
	"fdisk": true, "sfdisk": true, "sgdisk": true, "parted": true, "tar": true,
}

var diskDevice = regexp.MustCompile(`^/dev/(?:sd|nvme|disk|hd|xvd|vd|mmcblk)`)

// isDisk reports a disk device path, as far as the word is known.
func isDisk(w shellcmd.Word) bool {
	p := static(w)
	if !strings.HasPrefix(p, "/") {
		return false
	}
	return diskDevice.MatchString(path.Clean(p))
}

// Programs whose output is a download.
var downloaders = []string{"curl", "wget", "wget2"}

// Interpreters other than the shells (which shellcmd reads itself) that
// run code read from their input.
func isInterpreter(name string) bool {
	switch name {
	case "perl", "ruby", "node", "nodejs", "php":
		return true
	}
	return strings.HasPrefix(name, "python") || shellcmd.IsShell(name)
}

func fromDownload(sources []string) bool {
	for _, d := range downloaders {
		if slices.Contains(sources, d) {
			return true
		}
	}
	return false
}

// runsDownload reports code that comes from curl or wget: as the command
// (`$(curl …)`, `sh -c "$(curl …)"`, `curl … | sh`, `bash <(curl …)`), or
// as the input or script of an interpreter (`curl … | python3`).
func runsDownload(c *shellcmd.Command) bool {
	if c.Name == "" {
		return len(c.Args) > 0 && fromDownload(c.Args[0].Sources)
	}
	if !isInterpreter(c.Name) {
		return false
	}
	readsInput := true
	for _, a := range c.Args[1:] {
		switch {
		case a.Dynamic && a.Prefix == "" && strings.HasPrefix(a.Text, "<(") && fromDownload(a.Sources):
			return true
		case a.Text == "-":
		case strings.HasPrefix(a.Text, "-"):
			switch a.Text {
			case "-c", "-m", "-e", "-E", "-r", "-p", "--eval", "--print":
				readsInput = false
			}
		default:
			readsInput = false
		}
	}
	return readsInput && c.Stdin != nil && fromDownload(c.Stdin.Sources)
}

// SQL that destroys data.
var destructiveSQL = regexp.MustCompile(`(?is)\b(?:drop|truncate)(?:\s|/\*.*?\*/)+(?:table|database|schema)\b`)

// Programs that never run SQL: what they are given only prints, searches,
// stores or versions text. Their words are data; their output still
// counts when it is piped into a program that is not one of them.
var textOnly = map[string]bool{
	"echo": true, "printf": true, "cat": true, "tee": true, "grep": true, "egrep": true, "fgrep": true,
	"rg": true, "ag": true, "ack": true, "git": true, "head": true, "tail": true, "wc": true, "sort": true,
	"uniq": true, "cut": true, "tr": true, "diff": true, "cmp": true, "comm": true, "less": true, "more": true,
}

// runsSQL reports destructive SQL in what a command runs: its arguments
// (psql -c, mysql -e, sqlite3 db "…", python -c "…") and its input (a
// here-document, or text echoed into it), unless the command only handles
// text, or its code was read into commands of its own (bash -c).
func runsSQL(c *shellcmd.Command) bool {
	if c.Name == "" || c.Code || textOnly[c.Name] {
		return false
	}
	var b strings.Builder
	for _, a := range c.Args[1:] {
		b.WriteString(a.Text)
		b.WriteByte(' ')
	}
	if c.Stdin != nil {
		b.WriteString(c.Stdin.Text)
	}
	return destructiveSQL.MatchString(b.String())
}
