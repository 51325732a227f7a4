package shellcmd

import (
	"slices"
	"strings"
)

// peel splits a wrapper's words from the command it runs. ok is false
// when name is not a wrapper, or is one that runs nothing here
// (command -v).
func (w *walker) peel(name string, args []resolved) (wrapped, rest []resolved, fromInput, ok bool) {
	at := func(i int) ([]resolved, []resolved, bool, bool) {
		i = min(i, len(args))
		return args[:i], args[i:], false, true
	}
	switch name {
	case "command":
		i := 1
		for ; i < len(args); i++ {
			t := args[i].Text
			if t == "--" {
				i++
				break
			}
			if len(t) < 2 || t[0] != '-' {
				break
			}
			if strings.ContainsAny(t, "vV") {
				return nil, nil, false, false // only looks the name up
			}
		}
		return at(i)
	case "builtin", "nohup", "eatmydata":
		return at(skipOpts(args, 1, "", nil))
	case "busybox", "toybox":
		if len(args) > 1 && strings.HasPrefix(args[1].Text, "-") {
			return nil, nil, false, false
		}
		return at(1)
	case "exec":
		return at(skipOpts(args, 1, "a", nil))
	case "env":
		return w.peelEnv(args)
	case "xargs":
		wrapped, rest := peelXargs(args)
		if len(rest) == 0 {
			rest = []resolved{{Word: Word{Text: "echo", Prefix: "echo"}, tail: "echo"}}
		}
		return wrapped, rest, true, true
	case "sudo":
		i := skipOpts(args, 1, "ugpCDRTUrt", []string{"--user", "--group", "--prompt", "--close-from", "--chdir", "--chroot", "--command-timeout", "--other-user", "--role", "--type", "--host"})
		for i < len(args) && isAssign(args[i].Text) {
			i++
		}
		return at(i)
	case "doas":
		return at(skipOpts(args, 1, "uC", nil))
	case "nice":
		return at(skipOpts(args, 1, "n", []string{"--adjustment"}))
	case "timeout":
		i := skipOpts(args, 1, "sk", []string{"--signal", "--kill-after"})
		return at(i + 1) // the duration
	case "time":
		return at(skipOpts(args, 1, "fo", []string{"--format", "--output"}))
	case "setsid":
		return at(skipOpts(args, 1, "", nil))
	case "stdbuf":
		return at(skipOpts(args, 1, "ioe", []string{"--input", "--output", "--error"}))
	case "ionice":
		i := skipOpts(args, 1, "cnpPu", []string{"--class", "--classdata", "--pid", "--pgid", "--uid"})
		for _, a := range args[1:i] {
			if t := a.Text; strings.HasPrefix(t, "--p") || strings.HasPrefix(t, "--u") || (!strings.HasPrefix(t, "--") && strings.ContainsAny(t, "pPu")) {
				return nil, nil, false, false // acts on running processes
			}
		}
		return at(i)
	case "chroot":
		i := skipOpts(args, 1, "", []string{"--userspec", "--groups"})
		return at(i + 1) // the new root
	}
	return nil, nil, false, false
}

// skipOpts returns the index of the first operand at or after i (at most
// len(args)). Options
// start with "-": a cluster of letters, where one in withArg takes the
// rest of the word or else the next word; a long option in longArg takes
// the next word unless it has "=value"; "--" ends the options.
func skipOpts(args []resolved, i int, withArg string, longArg []string) int {
	for i < len(args) {
		t := args[i].Text
		switch {
		case t == "--":
			return i + 1
		case strings.HasPrefix(t, "--"):
			i++
			if !strings.Contains(t, "=") && slices.Contains(longArg, t) {
				i++
			}
		case len(t) > 1 && t[0] == '-' && !startsDynamic(args[i]):
			i++
			for j := 1; j < len(t); j++ {
				if strings.IndexByte(withArg, t[j]) >= 0 {
					if j+1 == len(t) {
						i++
					}
					break
				}
			}
		default:
			return i
		}
	}
	return min(i, len(args))
}

// startsDynamic says the word starts with a part only known when it runs.
func startsDynamic(r resolved) bool { return r.Dynamic && r.Prefix == "" }

// isAssign reports NAME=value.
func isAssign(t string) bool {
	eq := strings.IndexByte(t, '=')
	if eq <= 0 {
		return false
	}
	for i, r := range t[:eq] {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// peelEnv splits env's options and NAME=value words from its command;
// the string of -S is split into words that env reads on.
func (w *walker) peelEnv(args []resolved) (wrapped, rest []resolved, fromInput, ok bool) {
	wrapped = []resolved{args[0]}
	rest = args[1:]
	for len(rest) > 0 {
		a := rest[0]
		t := a.Text
		var split *resolved
		n := 1
		switch {
		case t == "--":
			return append(wrapped, a), rest[1:], false, true
		case strings.HasPrefix(t, "--split-string="):
			split = &resolved{Word: Word{Text: t[len("--split-string="):], Dynamic: a.Dynamic}}
		case t == "--split-string":
			if len(rest) > 1 {
				split, n = &rest[1], 2
			}
		case t == "--unset" || t == "--chdir":
			n = 2
		case strings.HasPrefix(t, "--"):
		case len(t) > 1 && t[0] == '-' && !startsDynamic(a):
			for j := 1; j < len(t); j++ {
				ch := t[j]
				if strings.IndexByte("uCPS", ch) < 0 {
					continue
				}
				if j+1 < len(t) {
					if ch == 'S' {
						split = &resolved{Word: Word{Text: t[j+1:], Dynamic: a.Dynamic}}
					}
				} else {
					n = 2
					if ch == 'S' && len(rest) > 1 {
						split = &rest[1]
					}
				}
				break
			}
		case t == "-":
		case isAssign(t):
		default:
			return wrapped, rest, false, true
		}
		n = min(n, len(rest))
		wrapped = append(wrapped, rest[:n]...)
		rest = rest[n:]
		if split != nil {
			rest = append(w.envSplit(*split), rest...)
		}
	}
	return wrapped, rest, false, true
}

// peelXargs splits xargs's options from its command.
func peelXargs(args []resolved) (wrapped, rest []resolved) {
	longArg := []string{"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}
	i := 1
	for i < len(args) {
		t := args[i].Text
		switch {
		case t == "--":
			return args[:i+1], args[i+1:]
		case strings.HasPrefix(t, "--"):
			i++
			if !strings.Contains(t, "=") && slices.Contains(longArg, t) {
				i++
			}
		case len(t) > 1 && t[0] == '-' && !startsDynamic(args[i]):
			i++
			for j := 1; j < len(t); j++ {
				ch := t[j]
				if strings.IndexByte("aEdILnPs", ch) >= 0 {
					if j+1 == len(t) {
						i++
					}
					break
				}
				if strings.IndexByte("eil", ch) >= 0 {
					break // an optional value, attached
				}
			}
		default:
			return args[:i], args[i:]
		}
	}
	i = min(i, len(args))
	return args[:i], args[i:]
}
