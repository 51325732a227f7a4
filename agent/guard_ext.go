package agent

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/shiroagent/shiro/agent/shellcmd"
)

// The guard's extension: destructive commands outside the spec's list
// (docs/tools.md names each with its reason; decisions/0041).
const (
	whyFindDelete   = "find -delete deletes every file it matches, through the whole tree"
	whyFindRm       = "find -exec rm deletes every file it matches, through the whole tree"
	whyRsyncDelete  = "rsync --delete deletes the files in the destination that the source lacks"
	whyRsyncRemove  = "rsync --remove-source-files deletes the files it copies"
	whyShred        = "shred overwrites the files it is given beyond recovery"
	whyTruncate     = "truncate to size 0 or smaller throws away what the files hold (the guard does not look at the disk, so it cannot tell a new file from one with work in it)"
	whyMvDevice     = "mv onto a device such as /dev/null destroys what it moves"
	whyMvHome       = "mv of / or a home directory moves everything under it away"
	whyKillAll      = "kill -1 signals every process it may, the sandbox's own included"
	whyCrontab      = "crontab -r deletes the crontab"
	whyOwnOutside   = "%s -R on %s changes files outside the workspace"
	whyCheckout     = "git checkout of paths discards their uncommitted changes"
	whyCheckoutF    = "git checkout --force discards uncommitted changes"
	whyRestore      = "git restore without --staged discards uncommitted changes in the working tree"
	whyStash        = "git stash %s deletes stashed work"
	whyReflog       = "git reflog expire --expire=now drops the only record of unreachable commits, which git gc then deletes"
	whyFilterBranch = "git filter-branch --force rewrites history over the backup of the last rewrite"
	whyWorktree     = "git worktree remove --force deletes a worktree with its uncommitted changes"
	whyCodeDeletes  = "the %s code deletes a directory tree (%s)"
	whyCodeRuns     = "the %s code runs the shell command %q, refused: %s"
	whyRunsDownload = "runs %s, which it has just downloaded"
)

// lineWhy applies the rules that read the line as a whole, and keeps what
// they need: the files downloaded so far, a cd that leaves the workspace.
func (j *judge) lineWhy(c *shellcmd.Command) string {
	if len(j.downloaded) > 0 {
		if f := runsFile(c); f != "" && slices.Contains(j.downloaded, path.Base(f)) {
			return fmt.Sprintf(whyRunsDownload, f)
		}
	}
	switch c.Name {
	case "curl", "wget", "wget2":
		j.downloaded = append(j.downloaded, downloads(c)...)
	case "cd", "pushd":
		ops := operands(c.Args[1:])
		if len(ops) == 0 || ops[0].Text == "-" || j.outside(ops[0]) {
			j.left = true
		}
	}
	return ""
}

// extendedWhy applies the extension's rules to one command.
func (j *judge) extendedWhy(c *shellcmd.Command) string {
	args := c.Args
	if deleters[c.Name] && c.ArgsFromInput && c.Stdin != nil && slices.Contains(c.Stdin.Sources, "find") {
		return whyFindRm // find … | xargs rm is find -exec rm
	}
	switch name := c.Name; name {
	case "find":
		return findWhy(args)
	case "rsync":
		for _, a := range options(args[1:]) {
			t, ok := strings.CutPrefix(static(a), "--")
			if !ok {
				continue
			}
			t, _, _ = strings.Cut(t, "=")
			switch {
			case t == "del" || strings.HasPrefix(t, "delete"):
				return whyRsyncDelete
			case t == "remove-source-files" || t == "remove-sent-files":
				return whyRsyncRemove
			}
		}
	case "shred":
		if len(operands(args[1:])) > 0 || c.ArgsFromInput {
			return whyShred
		}
	case "truncate":
		if truncateShrinks(args) {
			return whyTruncate
		}
	case "mv":
		return mvWhy(args)
	case "kill":
		if killsAll(args) {
			return whyKillAll
		}
	case "crontab":
		for _, a := range options(args[1:]) {
			if shortFlag(a, "r", "u") {
				return whyCrontab
			}
		}
	case "chmod", "chown", "chgrp":
		return j.ownWhy(name, args)
	case "git":
		return gitExtendedWhy(args)
	}
	if isInterpreter(c.Name) && !shellcmd.IsShell(c.Name) {
		return j.codeWhy(c)
	}
	return ""
}

// operands are the words that are not options: those not starting with
// "-" before "--", and every word after it.
func operands(args []shellcmd.Word) []shellcmd.Word {
	var out []shellcmd.Word
	for i, a := range args {
		if a.Text == "--" {
			return append(out, args[i+1:]...)
		}
		if !strings.HasPrefix(static(a), "-") || a.Text == "-" {
			out = append(out, a)
		}
	}
	return out
}

// optionUnknown finds a word among rm's options that may be an option
// only known when it runs: an unquoted expansion at its start (`$f`,
// `${FLAGS:--rf}`), or a computed option (`-$x`).
func optionUnknown(args []shellcmd.Word) (shellcmd.Word, bool) {
	for _, a := range options(args[1:]) {
		// `$dir/x.o` is a path whatever $dir holds; `$f`, `$(cat list)`
		// and `${FLAGS:--rf}` may be options.
		if a.Split && (a.Prefix == "" && !strings.Contains(a.Text, "/") || strings.HasPrefix(a.Prefix, "-")) {
			return a, true
		}
		if a.Dynamic && strings.HasPrefix(a.Prefix, "-") {
			return a, true
		}
	}
	return shellcmd.Word{}, false
}

// Programs that delete the files they are given.
var deleters = map[string]bool{"rm": true, "unlink": true, "rmdir": true, "shred": true}

// findWhy refuses find -delete and find -exec rm. A forced rm is left to
// rm's own rule (the command after find in the list).
func findWhy(args []shellcmd.Word) string {
	for i, a := range args {
		switch a.Text {
		case "-delete":
			return whyFindDelete
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		end := i + 1
		for end < len(args) && args[end].Text != ";" && args[end].Text != "+" {
			end++
		}
		run := args[i+1 : end]
		for len(run) > 1 && (run[0].Text == "sudo" || run[0].Text == "doas" || run[0].Text == "command" || run[0].Text == "env") {
			run = run[1:]
		}
		if len(run) > 0 && deleters[path.Base(static(run[0]))] && !(path.Base(run[0].Text) == "rm" && rmForced(run)) {
			return whyFindRm
		}
	}
	return ""
}

// truncateShrinks reports a size of 0, or one that can only shrink (-N,
// <N, /N, %N). An absolute size may grow or shrink a file; it is how
// image files are made, and is allowed.
func truncateShrinks(args []shellcmd.Word) bool {
	for i := 1; i < len(args); i++ {
		t := static(args[i])
		var v string
		switch {
		case t == "--":
			return false
		case t == "-s" || t == "--size":
			if i+1 < len(args) {
				v = static(args[i+1])
			}
			i++
		case strings.HasPrefix(t, "--size="):
			v = t[len("--size="):]
		case strings.HasPrefix(t, "-") && !strings.HasPrefix(t, "--") && strings.Contains(t, "s"):
			k := strings.IndexByte(t, 's')
			if strings.ContainsAny(t[1:k], "rS") {
				continue // -r FILE or -S (a block size) take the value
			}
			v = t[k+1:]
			if v == "" && i+1 < len(args) {
				v = static(args[i+1])
				i++
			}
		default:
			continue
		}
		if v != "" && strings.IndexByte("-</%", v[0]) >= 0 {
			return true
		}
		digits := strings.TrimRight(v, "KMGTPEZYRQBkmgtpezyrqbiI")
		if digits != "" && strings.Trim(digits, "0") == "" {
			return true
		}
	}
	return false
}

// mvWhy refuses mv onto a device and mv of / or a home directory.
func mvWhy(args []shellcmd.Word) string {
	ops := operands(args[1:])
	var dest *shellcmd.Word
	for i, a := range options(args[1:]) {
		t := static(a)
		if v, ok := strings.CutPrefix(t, "--target-directory="); ok {
			dest = &shellcmd.Word{Text: v, Prefix: v}
		} else if (t == "-t" || t == "--target-directory") && i+2 < len(args) {
			dest = &args[i+2]
			ops = slices.DeleteFunc(ops, func(w shellcmd.Word) bool { return w.Text == dest.Text })
		}
	}
	if dest == nil && len(ops) > 1 {
		dest, ops = &ops[len(ops)-1], ops[:len(ops)-1]
	}
	if dest != nil && !dest.Dynamic {
		if p := path.Clean(dest.Text); strings.HasPrefix(p, "/dev/") && !strings.HasPrefix(p, "/dev/shm/") && p != "/dev/shm" {
			return whyMvDevice
		}
	}
	for _, o := range ops {
		if isRoot(o) || isHome(o) {
			return whyMvHome
		}
	}
	return ""
}

func isRoot(w shellcmd.Word) bool { return !w.Dynamic && path.Clean(w.Text) == "/" }

// isHome reports a home directory itself: ~, ~user, $HOME, /root,
// /home/NAME.
func isHome(w shellcmd.Word) bool {
	t := strings.TrimSuffix(w.Text, "/")
	switch {
	case t == "$HOME" || t == "${HOME}":
		return true
	case w.Dynamic:
		return false
	case strings.HasPrefix(t, "~"):
		return !strings.Contains(t, "/")
	}
	p := path.Clean(t)
	if p == "/root" || p == "/home" {
		return true
	}
	rest, ok := strings.CutPrefix(p, "/home/")
	return ok && !strings.Contains(rest, "/")
}

// killsAll reports kill with the process id -1 (every process).
func killsAll(args []shellcmd.Word) bool {
	i := 1
	if i < len(args) {
		switch t := args[i].Text; {
		case t == "-s" || t == "-n" || t == "--signal":
			i += 2
		case t == "-l" || t == "-L" || t == "--list" || t == "--table":
			return false
		case t != "--" && strings.HasPrefix(t, "-"):
			i++ // the signal: -9, -KILL, -1 (SIGHUP) here
		}
	}
	for ; i < len(args); i++ {
		if args[i].Text == "-1" {
			return true
		}
	}
	return false
}

// ownWhy refuses chmod, chown and chgrp -R on a path outside the
// workspace; inside it they are ordinary.
func (j *judge) ownWhy(name string, args []shellcmd.Word) string {
	recursive, reference := false, false
	for _, a := range options(args[1:]) {
		recursive = recursive || shortFlag(a, "R", "") || longFlag(a, 3, "recursive")
		reference = reference || longFlag(a, 3, "reference")
	}
	if !recursive {
		return ""
	}
	ops := operands(args[1:])
	if name == "chmod" {
		// A mode may look like an option: chmod -R -w dir.
		for _, a := range options(args[1:]) {
			if chmodModeOption.MatchString(a.Text) {
				reference = true
			}
		}
	}
	if !reference && len(ops) > 0 {
		ops = ops[1:] // the mode or the owner
	}
	for _, o := range ops {
		if j.outside(o) {
			return fmt.Sprintf(whyOwnOutside, name, o.Text)
		}
	}
	return ""
}

var chmodModeOption = regexp.MustCompile(`^-[rwxXst]+$`)

// outside reports a path that may be outside the workspace: /, a home
// directory or a path in one, an absolute path not under the workspace,
// a relative one that climbs out of it, or any relative one after a cd
// that may have left it. A computed path is judged by its written part.
func (j *judge) outside(w shellcmd.Word) bool {
	t := w.Text
	if strings.HasPrefix(t, "$HOME") || strings.HasPrefix(t, "${HOME}") || strings.HasPrefix(t, "~") {
		return true
	}
	if w.Dynamic {
		// The part before the first expansion or glob (`/*` is under /).
		if i := strings.IndexAny(t, "$`*?["); i >= 0 {
			t = t[:i]
		}
		if !strings.HasPrefix(t, "/") {
			return false
		}
	}
	p := path.Clean(t)
	if strings.HasPrefix(p, "/") {
		return j.workspace == "" || !(p == j.workspace || strings.HasPrefix(p, strings.TrimSuffix(j.workspace, "/")+"/"))
	}
	return j.left || p == ".." || strings.HasPrefix(p, "../")
}

// gitExtendedWhy refuses git's own discards.
func gitExtendedWhy(args []shellcmd.Word) string {
	i := gitSplit(args)
	if i >= len(args) {
		return ""
	}
	sub, all := args[i].Text, args[i+1:]
	rest := options(all)
	switch sub {
	case "checkout":
		for _, a := range rest {
			switch a.Text {
			case "--ours", "--theirs", "-p", "--patch":
				// Resolving a conflict from one side; choosing hunks.
				return ""
			}
		}
		for _, a := range rest {
			if longFlag(a, 3, "force") || shortFlag(a, "f", "bB") {
				return whyCheckoutF
			}
			if t := a.Text; !a.Dynamic && (t == "." || t == ":/" || t == "*" || t == ":/*") {
				return whyCheckout
			}
		}
		if len(rest) < len(all) && len(all) > len(rest)+1 {
			return whyCheckout // paths after --
		}
	case "restore":
		staged, worktree := false, false
		for _, a := range rest {
			staged = staged || shortFlag(a, "S", "s") || longFlag(a, 3, "staged")
			worktree = worktree || shortFlag(a, "W", "s") || longFlag(a, 3, "worktree")
		}
		if (!staged || worktree) && len(operands(all)) > 0 {
			return whyRestore
		}
	case "stash":
		if len(all) > 0 && (all[0].Text == "clear" || all[0].Text == "drop") {
			return fmt.Sprintf(whyStash, all[0].Text)
		}
	case "reflog":
		if len(all) == 0 || (all[0].Text != "expire" && all[0].Text != "delete") {
			break
		}
		if all[0].Text == "delete" {
			return whyReflog
		}
		for k, a := range all[1:] {
			t := static(a)
			name, v, ok := strings.Cut(t, "=")
			if !ok && (t == "--expire" || t == "--expire-unreachable") && k+2 < len(all) {
				name, v = t, static(all[k+2])
			}
			if (name == "--expire" || name == "--expire-unreachable") && (v == "now" || v == "all" || v == "0") {
				return whyReflog
			}
		}
	case "filter-branch":
		for _, a := range rest {
			if shortFlag(a, "f", "") || longFlag(a, 3, "force") {
				return whyFilterBranch
			}
		}
	case "worktree":
		if len(all) == 0 || all[0].Text != "remove" {
			break
		}
		for _, a := range options(all[1:]) {
			if shortFlag(a, "f", "") || longFlag(a, 3, "force") {
				return whyWorktree
			}
		}
	}
	return ""
}

// diskWritten reports a disk device that the command writes: any operand
// of tee, shred, blkdiscard and mkswap; cp's destination only (reading a
// disk into an image is a backup); tar's archive when it writes one;
// wipefs only when it erases (-a, -o) and is not told -n; a partitioner
// unless it only lists, prints, verifies or backs up.
func diskWritten(name string, args []shellcmd.Word) bool {
	opts, ops := options(args[1:]), operands(args[1:])
	anyDisk := func(ws []shellcmd.Word) bool { return slices.ContainsFunc(ws, isDisk) }
	has := func(short string, long ...string) bool {
		return slices.ContainsFunc(opts, func(a shellcmd.Word) bool {
			return (short != "" && shortFlag(a, short, "")) || (len(long) > 0 && longFlag(a, 3, long...))
		})
	}
	switch name {
	case "cp":
		for i := 1; i < len(args); i++ {
			t := static(args[i])
			if t == "--" {
				break
			}
			if (t == "-t" || t == "--target-directory") && i+1 < len(args) {
				return isDisk(args[i+1])
			}
			if v, ok := strings.CutPrefix(t, "--target-directory="); ok {
				return isDisk(shellcmd.Word{Text: v})
			}
		}
		return len(ops) > 1 && isDisk(ops[len(ops)-1])
	case "tar":
		return tarWritesDisk(args)
	case "wipefs":
		return has("ao", "all", "offset") && !has("n", "no-act") && anyDisk(ops)
	case "fdisk":
		return !has("lxs", "list", "list-details", "getsz", "help", "version") && anyDisk(ops)
	case "sfdisk":
		return !has("dlFsJgVnv", "dump", "list", "list-free", "show-size", "json", "show-geometry", "verify", "no-act", "help", "version", "backup-file") && anyDisk(ops)
	case "sgdisk":
		return sgdiskWrites(args) && anyDisk(ops)
	case "parted":
		return !has("l", "list", "help", "version") && anyDisk(ops)
	}
	return anyDisk(args[1:])
}

// tarWritesDisk reports tar creating, appending to or updating an archive
// that is a disk: tar -cf /dev/sda, tar cf /dev/sda (the old form),
// --file=/dev/sda.
func tarWritesDisk(args []shellcmd.Word) bool {
	writes := false
	var archive []shellcmd.Word
	for i := 1; i < len(args); i++ {
		t := static(args[i])
		switch {
		case t == "--":
			i = len(args)
		case strings.HasPrefix(t, "--"):
			name, v, eq := strings.Cut(t[2:], "=")
			switch name {
			case "create", "append", "update", "catenate", "concatenate":
				writes = true
			case "file":
				if eq {
					archive = append(archive, shellcmd.Word{Text: v, Prefix: v})
				} else if i+1 < len(args) {
					archive = append(archive, args[i+1])
					i++
				}
			}
		case i == 1 || strings.HasPrefix(t, "-"):
			// A cluster; the first word may omit its "-" (tar cf x).
			if !strings.HasPrefix(t, "-") && strings.ContainsAny(t, "/.") {
				continue
			}
			letters := strings.TrimPrefix(t, "-")
			for k := 0; k < len(letters); k++ {
				switch letters[k] {
				case 'c', 'r', 'u', 'A':
					writes = true
				case 'f':
					if v := letters[k+1:]; v != "" && strings.HasPrefix(t, "-") {
						archive = append(archive, shellcmd.Word{Text: v, Prefix: v})
					} else if i+1 < len(args) {
						archive = append(archive, args[i+1])
						i++
					}
					k = len(letters)
				}
			}
		}
	}
	return writes && slices.ContainsFunc(archive, isDisk)
}

// sgdiskWrites reports sgdisk given an option that changes the disk:
// anything but print, verify, backup, info, the lists and help, unless
// --pretend keeps it all in memory.
func sgdiskWrites(args []shellcmd.Word) bool {
	writes := false
	for i := 1; i < len(args); i++ {
		t := static(args[i])
		switch {
		case t == "--":
			return writes
		case strings.HasPrefix(t, "--"):
			name, _, eq := strings.Cut(t[2:], "=")
			switch name {
			case "pretend":
				return false
			case "backup", "info":
				if !eq {
					i++
				}
			case "print", "verify", "list-types", "print-mbr", "help", "version", "usage":
			default:
				writes = true
			}
		case strings.HasPrefix(t, "-") && len(t) > 1:
			for k := 1; k < len(t); k++ {
				switch c := t[k]; {
				case c == 'P':
					return false
				case c == 'b' || c == 'i':
					if k+1 == len(t) {
						i++
					} else if t[k+1] == '=' {
						k = len(t)
					}
					k = len(t)
				case strings.IndexByte("pvLO?V", c) >= 0:
				default:
					writes = true
					k = len(t)
				}
			}
		}
	}
	return writes
}

// imageOntoDevice reports mkfs.erofs or mkfs.cramfs writing their image
// onto a device, or onto a path only known when it runs. They build an
// image file from a directory (mkfs.erofs IMAGE DIR, mkfs.cramfs DIR
// IMAGE), which formats nothing.
func imageOntoDevice(name string, args []shellcmd.Word) bool {
	var ops []shellcmd.Word
	withValue := map[string]string{"mkfs.erofs": "CELTUbdxz", "mkfs.cramfs": "beiIN"}[name]
	for i := 1; i < len(args); i++ {
		t := static(args[i])
		switch {
		case t == "--":
			ops = append(ops, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(t, "--"):
		case len(t) > 1 && t[0] == '-':
			if strings.IndexByte(withValue, t[len(t)-1]) >= 0 && !strings.ContainsAny(t[1:len(t)-1], withValue) {
				i++
			}
		default:
			ops = append(ops, args[i])
		}
	}
	if len(ops) == 0 {
		return false
	}
	image := ops[0]
	if name == "mkfs.cramfs" {
		image = ops[len(ops)-1]
	}
	return (image.Dynamic && !strings.HasPrefix(image.Prefix, "/") && !strings.Contains(image.Prefix, ".")) || isDevice(static(image)) || path.Clean(static(image)) == "/dev"
}

// shutdownCancels reports shutdown -c (cancel a scheduled shutdown), -k
// (only warn) or --help.
func shutdownCancels(args []shellcmd.Word) bool {
	for _, a := range args[1:] {
		if shortFlag(a, "ck", "") || a.Text == "--help" {
			return true
		}
	}
	return false
}

// whenCancel reports systemctl --when cancel (cancel a scheduled halt).
func whenCancel(args []shellcmd.Word) bool {
	for i, a := range args {
		if a.Text == "--when=cancel" || (a.Text == "--when" && i+1 < len(args) && args[i+1].Text == "cancel") {
			return true
		}
	}
	return false
}

// codeOf returns the code an interpreter is given on its command line
// (python3 -c, perl -e, ruby -e, node -e/-p, php -r), or reads from a
// here-document or echo when it is given no script.
func codeOf(c *shellcmd.Command) []string {
	var code []string
	script := false
	args := c.Args
	name := c.Name
	// The letters that bring code; those that take a value (attached, or
	// the next word when the letter ends the word and is in apart).
	codeLetters, valueLetters, apart := "c", "mWXQ", "WXQ"
	switch {
	case name == "perl":
		codeLetters, valueLetters, apart = "eE", "iIMmxdDCF", "I"
	case name == "ruby":
		codeLetters, valueLetters, apart = "e", "rICEFxKTWi", "rICE"
	case name == "node" || name == "nodejs":
		codeLetters, valueLetters, apart = "ep", "r", "r"
	case name == "php":
		codeLetters, valueLetters, apart = "r", "cdfz", "cdz"
	}
	for i := 1; i < len(args) && !script; i++ {
		t := args[i].Text
		switch {
		case t == "--" || t == "-":
			i = len(args)
		case strings.HasPrefix(t, "--"):
			v, ok := strings.CutPrefix(t, "--eval=")
			if !ok {
				v, ok = strings.CutPrefix(t, "--print=")
			}
			switch {
			case ok:
				code = append(code, v)
			case (t == "--eval" || t == "--print") && i+1 < len(args):
				code = append(code, args[i+1].Text)
				i++
			}
		case len(t) > 1 && t[0] == '-':
		letters:
			for k := 1; k < len(t); k++ {
				switch {
				case strings.IndexByte(codeLetters, t[k]) >= 0:
					if v := t[k+1:]; v != "" && name != "node" && name != "nodejs" {
						code = append(code, v)
					} else if i+1 < len(args) {
						code = append(code, args[i+1].Text)
						i++
					}
					if name == "python" || strings.HasPrefix(name, "python") {
						script = true // python -c takes the rest as its argv
					}
					break letters
				case name != "perl" && name != "ruby" && t[k] == 'm' && strings.HasPrefix(name, "python"):
					return code // python -m runs a module
				case strings.IndexByte(valueLetters, t[k]) >= 0:
					if k+1 == len(t) && strings.IndexByte(apart, t[k]) >= 0 {
						i++
					}
					break letters
				}
			}
		default:
			script = true
		}
	}
	if len(code) == 0 && !script && c.Stdin != nil && c.Stdin.File == "" {
		code = append(code, c.Stdin.Text)
	}
	return code
}

// Calls that delete a directory tree: Python's shutil.rmtree, Node's
// fs.rmSync and rimraf, Perl's File::Path, Ruby's FileUtils.
var treeDeletion = regexp.MustCompile(`\b(?:rmtree|rmSync|remove_tree|rm_rf|rm_r|rimraf|removedirs|remove_entry_secure)\b\s*[(\s'"$]|\b(?:rm|rmdir|rmdirSync)\s*\([^)]*\brecursive\s*:\s*true`)

// A string literal in a one-liner: '…', "…" or `…`.
var stringLiteral = regexp.MustCompile(`'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|` + "`[^`]*`")

// A call that runs a command, in Python, Perl, Ruby, Node or PHP; a
// backquoted string in Perl and Ruby runs one too.
var runsShell = regexp.MustCompile(`\b(?:system|exec\w*|popen\w*|spawn\w*|run|call|check_output|check_call|getoutput|getstatusoutput|Popen|qx|shell_exec|passthru|proc_open)\b|%x|` + "`")

// codeWhy reads the code an interpreter is given as far as one-liners go:
// a call that deletes a tree, and a string literal (or a list of them,
// `['rm', '-rf', d]`) that is itself a refused shell command.
func (j *judge) codeWhy(c *shellcmd.Command) string {
	for _, code := range codeOf(c) {
		if m := treeDeletion.FindString(code); m != "" {
			return fmt.Sprintf(whyCodeDeletes, c.Name, strings.TrimRight(m, "(\t\n '\"$"))
		}
		if j.depth >= 2 || !runsShell.MatchString(code) {
			continue
		}
		locs := stringLiteral.FindAllStringIndex(code, 64)
		var run []string
		flush := func() string {
			defer func() { run = run[:0] }()
			if len(run) < 2 {
				return ""
			}
			return j.literalWhy(c.Name, strings.Join(run, " "))
		}
		for k, l := range locs {
			lit := unescapeLiteral(code[l[0]+1 : l[1]-1])
			if strings.ContainsAny(lit, " \t\n") {
				if why := j.literalWhy(c.Name, lit); why != "" {
					return why
				}
			}
			if k > 0 && strings.Trim(code[locs[k-1][1]:l[0]], " \t\n,[]()") != "" {
				if why := flush(); why != "" {
					return why
				}
			}
			run = append(run, lit)
		}
		if why := flush(); why != "" {
			return why
		}
	}
	return ""
}

// literalWhy judges a string literal as a shell command line.
func (j *judge) literalWhy(prog, lit string) string {
	inner := &judge{workspace: j.workspace, depth: j.depth + 1}
	why := inner.why(lit)
	if why == "" || strings.HasPrefix(why, "it is too large") {
		return ""
	}
	shown := lit
	if len(shown) > 60 {
		shown = shown[:60] + "…"
	}
	return fmt.Sprintf(whyCodeRuns, prog, shown, why)
}

func unescapeLiteral(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\"`, `"`, `\n`, "\n", `\t`, "\t").Replace(s)
}

// downloads returns the base names of the files curl or wget write:
// -o FILE, -O (the URL's last element), wget's default, a redirect of
// their output.
func downloads(c *shellcmd.Command) []string {
	var out []string
	args := c.Args
	remote := false
	valueLetters := "dHuXAebcFTwxmrYyzCEKPQtUD" // curl's short options with a value
	fileLetter := "o"
	if c.Name != "curl" {
		valueLetters, fileLetter = "oaiBetTwQPUlARDIX", "O"
	}
	toStdout := false
	var urls []string
	for i := 1; i < len(args); i++ {
		t := static(args[i])
		switch {
		case strings.HasPrefix(t, "--"):
			name, v, eq := strings.Cut(t[2:], "=")
			switch name {
			case "output", "output-document":
				if !eq && i+1 < len(args) {
					v = static(args[i+1])
					i++
				}
				if v == "-" {
					toStdout = true
				} else {
					out = append(out, v)
				}
			case "remote-name", "remote-name-all":
				remote = true
			}
		case len(t) > 1 && t[0] == '-':
			for k := 1; k < len(t); k++ {
				ch := t[k]
				if c.Name == "curl" && ch == 'O' {
					remote = true
					continue
				}
				if strings.IndexByte(fileLetter, ch) >= 0 {
					v := t[k+1:]
					if v == "" && i+1 < len(args) {
						v = static(args[i+1])
						i++
					}
					if v == "-" {
						toStdout = true
					} else {
						out = append(out, v)
					}
					break
				}
				if strings.IndexByte(valueLetters, ch) >= 0 {
					if k+1 == len(t) {
						i++
					}
					break
				}
			}
		case strings.Contains(t, "://"):
			urls = append(urls, t)
		}
	}
	if remote || (c.Name != "curl" && len(out) == 0 && !toStdout) {
		for _, u := range urls {
			u, _, _ = strings.Cut(u, "?")
			if b := path.Base(u); b != "" && b != "/" && b != "." {
				out = append(out, b)
			}
		}
	}
	for _, r := range c.Redirects {
		if (r.Op == ">" || r.Op == ">>" || r.Op == ">|") && (r.Fd == "" || r.Fd == "1") {
			out = append(out, static(r.Target))
		}
	}
	for i, f := range out {
		out[i] = path.Base(f)
	}
	return slices.DeleteFunc(out, func(f string) bool { return f == "" || f == "null" || f == "." })
}

// runsFile returns the file a command runs as code: the program when it
// is a path (./install.sh), the script of a shell or an interpreter, what
// source reads.
func runsFile(c *shellcmd.Command) string {
	if len(c.Args) == 0 || c.Name == "" {
		return ""
	}
	if p := c.Args[0].Text; strings.Contains(p, "/") && !c.Args[0].Dynamic {
		return p
	}
	if c.Name == "source" || c.Name == "." {
		if len(c.Args) > 1 {
			return static(c.Args[1])
		}
		return ""
	}
	if !isInterpreter(c.Name) {
		return ""
	}
	for _, a := range c.Args[1:] {
		t := a.Text
		switch {
		case t == "-c" || t == "-e" || t == "-m" || t == "-E" || t == "-r" || t == "--eval" || t == "--command":
			return ""
		case strings.HasPrefix(t, "-"):
		default:
			return static(a)
		}
	}
	return ""
}
