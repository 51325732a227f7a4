package shellcmd

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Shells whose -c string and standard input are read as shell code.
var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "ash": true, "fish": true, "rbash": true}

// IsShell reports a shell shellcmd reads code for.
func IsShell(name string) bool { return shells[name] }

// run peels the wrappers off args, lists the command and reads the code
// and commands it runs.
func (w *walker) run(args []resolved, c ctx) (*Command, error) {
	cmd := &Command{Redirects: c.redirs, Stdin: c.stdin, Func: c.fn, Background: c.background, Piped: c.piped, Depth: w.depth}
	for range maxWrappers {
		name := baseName(args[0])
		wrapped, rest, fromInput, ok := w.peel(name, args)
		if !ok || len(rest) == 0 {
			// Not a wrapper, or one with nothing to run (exec with
			// redirections only, env printing the environment).
			break
		}
		cmd.Wrappers = append(cmd.Wrappers, Wrapper{Name: name, Args: plain(wrapped)})
		cmd.ArgsFromInput = cmd.ArgsFromInput || fromInput
		args = rest
	}
	cmd.Args = plain(args)
	cmd.Name = baseName(args[0])
	if err := w.emit(cmd); err != nil {
		return cmd, err
	}
	if err := w.carried(cmd, args, c); err != nil {
		return cmd, err
	}
	if cmd.Code && xargsReplaces(cmd) {
		// xargs -I puts its input into the code (sh -c 'x {}').
		var sources []string
		if cmd.Stdin != nil {
			sources = cmd.Stdin.Sources
		}
		return cmd, w.unknownCode(cmd, "(the input xargs puts into the code)", sources)
	}
	return cmd, nil
}

// xargsReplaces reports a command run by xargs -I, -i or --replace.
func xargsReplaces(cmd *Command) bool {
	for _, wr := range cmd.Wrappers {
		if wr.Name != "xargs" {
			continue
		}
		for _, a := range wr.Args[1:] {
			t := a.Text
			if strings.HasPrefix(t, "--replace") || (len(t) > 1 && t[0] == '-' && t[1] != '-' && strings.ContainsAny(t, "Ii")) {
				return true
			}
		}
	}
	return false
}

func plain(rs []resolved) []Word {
	out := make([]Word, len(rs))
	for i, r := range rs {
		out[i] = r.Word
	}
	return out
}

// carried reads what cmd runs itself: shell code, or another command.
func (w *walker) carried(cmd *Command, args []resolved, c ctx) error {
	name := cmd.Name
	switch {
	case shells[name]:
		return w.shell(cmd, args)
	case name == "eval":
		if len(args) < 2 {
			return nil
		}
		return w.code(cmd, joinText(args[1:]), "eval")
	case name == "source" || name == ".":
		switch {
		case len(args) < 2:
		case args[1].procSubst:
			return w.unknownCode(cmd, args[1].Text, args[1].Sources)
		case isStdin(args[1].Text):
			return w.stdinCode(cmd)
		}
	case name == "" && len(args) > 1 && isShellCFlag(args[1]):
		// `$SHELL -c '…'`: whatever runs, the code is likely shell.
		return w.shell(cmd, args)
	case name == "trap":
		ops := args[skipOpts(args, 1, "", nil):]
		if len(ops) >= 2 && ops[0].Text != "-" {
			return w.code(cmd, ops[0].Text, "trap")
		}
	case name == "alias":
		for _, a := range args[1:] {
			if i := strings.IndexByte(a.Text, '='); i > 0 {
				if err := w.code(cmd, a.Text[i+1:], "alias"); err != nil {
					return err
				}
			}
		}
	case name == "su" || name == "runuser" || name == "script" || name == "flock":
		code, rest := codeOption(name, args)
		if code != nil {
			return w.code(cmd, code.Text, name+" -c")
		}
		if name == "flock" && len(rest) > 1 && !isNumber(rest[0].Text) {
			cmd.Code = true
			_, err := w.run(rest[1:], c)
			return err
		}
	case name == "watch":
		i, exec := watchOpts(args)
		if i >= len(args) {
			return nil
		}
		if exec {
			cmd.Code = true
			_, err := w.run(args[i:], c)
			return err
		}
		return w.code(cmd, joinText(args[i:]), "watch")
	case name == "find":
		return w.findExec(cmd, args, c)
	case name == "git":
		return w.gitConfig(cmd, args)
	}
	return nil
}

func joinText(rs []resolved) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Text
	}
	return strings.Join(parts, " ")
}

// shell reads the code a shell runs: its -c string, a script that is a
// process substitution, or its standard input.
func (w *walker) shell(cmd *Command, args []resolved) error {
	via := args[0].Text + " -c"
	i, dashC, dashS := 1, false, false
	var code *resolved
options:
	for i < len(args) {
		a := args[i]
		t := a.Text
		switch {
		case t == "--" || t == "-":
			i++
			break options
		case t == "--rcfile" || t == "--init-file":
			i += 2
		case strings.HasPrefix(t, "--command="), strings.HasPrefix(t, "--init-command="):
			v := t[strings.IndexByte(t, '=')+1:]
			code = &resolved{Word: Word{Text: v, Dynamic: a.Dynamic, Sources: a.Sources}}
			i++
		case t == "--command" || t == "--init-command" || (cmd.Name == "fish" && t == "-C"):
			if i+1 < len(args) {
				code = &args[i+1]
			}
			i += 2
		case strings.HasPrefix(t, "--"):
			i++
		case len(t) > 1 && (t[0] == '-' || t[0] == '+') && !a.Dynamic:
			i++
			for _, ch := range t[1:] {
				switch ch {
				case 'c':
					dashC = true
				case 's':
					dashS = true
				case 'o', 'O':
					i++
				}
			}
		default:
			break options
		}
	}
	var ops []resolved
	if i < len(args) {
		ops = args[i:]
	}
	if code != nil {
		if err := w.code(cmd, code.Text, via); err != nil {
			return err
		}
	}
	switch {
	case dashC:
		if len(ops) > 0 {
			return w.code(cmd, ops[0].Text, via)
		}
		return nil
	case code != nil:
		return nil
	case len(ops) > 0 && !dashS:
		if ops[0].procSubst {
			return w.unknownCode(cmd, ops[0].Text, ops[0].Sources)
		}
		if !isStdin(ops[0].Text) {
			return nil // a script file: not the command line's
		}
	}
	return w.stdinCode(cmd)
}

// isStdin reports a path that names standard input.
func isStdin(p string) bool {
	switch p {
	case "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return false
}

// isShellCFlag reports -c, or a cluster of letters with c (-ec).
func isShellCFlag(w resolved) bool {
	t := w.Text
	if w.Dynamic || len(t) < 2 || t[0] != '-' || t[1] == '-' {
		return false
	}
	for _, r := range t[1:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return strings.ContainsRune(t, 'c')
}

// stdinCode reads what cmd reads on its input as shell code.
func (w *walker) stdinCode(cmd *Command) error {
	in := cmd.Stdin
	if in == nil || in.File != "" {
		return nil
	}
	if in.Text != "" {
		if err := w.input(cmd, in.Text, "the input of "+cmd.Name); err != nil {
			return err
		}
	}
	if in.Dynamic {
		return w.unknownCode(cmd, "(the code "+cmd.Name+" reads from its input)", in.Sources)
	}
	return nil
}

// codeOption finds the -c/--command string of su, runuser, script and
// flock, and the operands when there is none.
func codeOption(name string, args []resolved) (*resolved, []resolved) {
	withArg := map[string]string{"su": "gGsw", "runuser": "gGsuw", "script": "EIOTBm", "flock": "wE"}[name]
	i := 1
	for i < len(args) {
		a := args[i]
		t := a.Text
		switch {
		case t == "--":
			return nil, args[i+1:]
		case t == "--command" || t == "--session-command":
			if i+1 < len(args) {
				return &args[i+1], nil
			}
			return nil, nil
		case strings.HasPrefix(t, "--command=") || strings.HasPrefix(t, "--session-command="):
			v := t[strings.IndexByte(t, '=')+1:]
			return &resolved{Word: Word{Text: v, Dynamic: a.Dynamic, Sources: a.Sources}}, nil
		case strings.HasPrefix(t, "--"):
			i++
		case len(t) > 1 && t[0] == '-':
			i++
			for j := 1; j < len(t); j++ {
				ch := t[j]
				if ch == 'c' {
					if j+1 < len(t) {
						return &resolved{Word: Word{Text: t[j+1:], Dynamic: a.Dynamic, Sources: a.Sources}}, nil
					}
					if i < len(args) {
						return &args[i], nil
					}
					return nil, nil
				}
				if strings.IndexByte(withArg, ch) >= 0 {
					if j+1 == len(t) {
						i++
					}
					break
				}
			}
		default:
			if name != "flock" {
				i++ // su USER, script FILE
				continue
			}
			// flock FILE -c CODE, or flock FILE COMMAND…
			if i+2 < len(args) && (args[i+1].Text == "-c" || args[i+1].Text == "--command") {
				return &args[i+2], nil
			}
			return nil, args[i:]
		}
	}
	return nil, nil
}

// watchOpts returns where watch's command starts and whether -x runs it
// without a shell.
func watchOpts(args []resolved) (int, bool) {
	exec := false
	i := 1
	for i < len(args) {
		t := args[i].Text
		switch {
		case t == "--":
			return i + 1, exec
		case t == "--exec":
			exec = true
			i++
		case t == "--interval" || t == "--equexit":
			i += 2
		case strings.HasPrefix(t, "--"):
			i++
		case len(t) > 1 && t[0] == '-':
			i++
			for j := 1; j < len(t); j++ {
				if t[j] == 'x' {
					exec = true
				}
				if t[j] == 'n' || t[j] == 'q' {
					if j+1 == len(t) {
						i++
					}
					break
				}
			}
		default:
			return i, exec
		}
	}
	return i, exec
}

// findExec lists the commands of find's -exec, -execdir, -ok and -okdir.
func (w *walker) findExec(cmd *Command, args []resolved, c ctx) error {
	for i := 1; i < len(args); i++ {
		switch args[i].Text {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		j := i + 1
		for j < len(args) && args[j].Text != ";" && args[j].Text != "+" {
			j++
		}
		if j > i+1 {
			cmd.Code = true
			if _, err := w.run(args[i+1:j], c); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// gitConfig reads the values of git -c that git runs as commands.
func (w *walker) gitConfig(cmd *Command, args []resolved) error {
	for i := 1; i+1 < len(args); i++ {
		t := args[i].Text
		if t != "-c" {
			if !strings.HasPrefix(t, "-") {
				return nil // the subcommand
			}
			if t == "-C" || t == "--git-dir" || t == "--work-tree" || t == "--namespace" || t == "--config-env" {
				i++
			}
			continue
		}
		i++
		kv := args[i].Text
		eq := strings.IndexByte(kv, '=')
		if eq < 0 {
			continue
		}
		key, value := strings.ToLower(kv[:eq]), kv[eq+1:]
		if code, ok := gitCommandValue(key, value); ok {
			if err := w.code(cmd, code, "git -c "+kv[:eq]); err != nil {
				return err
			}
		}
	}
	return nil
}

// gitCommandValue returns the shell code a git setting runs.
func gitCommandValue(key, value string) (string, bool) {
	if strings.HasPrefix(value, "!") && (strings.HasPrefix(key, "alias.") || key == "credential.helper" || strings.HasPrefix(key, "credential.")) {
		return value[1:], true
	}
	switch key {
	case "core.sshcommand", "core.pager", "core.editor", "core.fsmonitor", "core.askpass", "sequence.editor",
		"diff.external", "gpg.program", "interactive.difffilter", "uploadpack.packobjectshook":
		return value, true
	}
	parts := strings.Split(key, ".")
	last := parts[len(parts)-1]
	switch {
	case parts[0] == "pager":
		return value, true
	case len(parts) == 3 && parts[0] == "diff" && (last == "command" || last == "textconv"):
		return value, true
	case len(parts) == 3 && parts[0] == "merge" && last == "driver":
		return value, true
	case len(parts) == 3 && parts[0] == "filter" && (last == "clean" || last == "smudge" || last == "process"):
		return value, true
	case len(parts) >= 2 && parts[0] == "gpg" && last == "program":
		return value, true
	}
	return "", false
}

// envSplit splits the string of env -S into words, as env does (near
// enough: quotes, backslashes, and ${NAME} as a dynamic part).
func (w *walker) envSplit(s resolved) []resolved {
	p := syntax.NewParser(syntax.Variant(syntax.LangBash))
	inner := &walker{state: w.state, src: s.Text, depth: w.depth}
	var out []resolved
	failed := false
	for word, err := range p.WordsSeq(strings.NewReader(s.Text)) {
		// The loop runs to its end, as in walker.parse.
		switch {
		case failed:
		case err != nil:
			failed = true
		case word != nil:
			out = append(out, inner.words(word)...)
		}
	}
	if failed {
		out = out[:0]
		for _, f := range strings.Fields(s.Text) {
			out = append(out, resolved{Word: Word{Text: f, Prefix: f, Dynamic: s.Dynamic}, tail: f})
		}
	}
	return out
}
