// Package shellcmd reads a bash command line the way bash would run it and
// lists every simple command in it: the argv each one runs with, the
// redirections it is subject to, what feeds its standard input, and whether
// anything in it is only known when it runs. The guard judges these
// commands instead of the raw text, so `\rm`, `"rm"`, `/bin/rm`,
// `command rm` and `bash -c 'rm …'` are all the rm they are, and quoted
// text that is only printed (`echo 'rm -rf /'`) runs nothing. The list also
// serves anything else that needs to know what a command line runs (a
// "this command prefix is allowed" rule: every listed command must match).
//
// # What is walked
//
// Pipelines, lists (&&, ||, ;, &), subshells, blocks, if/while/until/for/
// select/case bodies, function bodies, command and process substitutions
// (also inside arithmetic, [[ ]] tests, assignments, redirections and
// here-documents), declarations (export, local, …), time and coproc.
//
// # Shell code inside commands
//
// Text that a command runs as shell code is parsed too, its commands listed
// one Depth deeper:
//
//   - the -c string of sh, bash, zsh, dash, ksh, mksh, ash and fish (also
//     fish's --command=, and of a computed command given -c: `$SHELL -c`);
//   - the arguments of eval, the action of trap, the value of alias NAME=VALUE;
//   - the -c/--command string of su, runuser, script and flock;
//   - the command of watch (joined as watch does, unless -x);
//   - `git -c alias.NAME=!…` and the git settings whose value is a command
//     (core.sshCommand, core.pager, core.editor, core.fsmonitor,
//     sequence.editor, diff.external and the like);
//   - what a shell reads on its standard input when the command line shows
//     it: a here-document or here-string (`bash <<EOF`), or the output of
//     echo, printf, or cat/tee fed by one of these, piped into it (with
//     backslash escapes read both as written, as bash's echo prints them,
//     and decoded, as sh's echo and printf print them), also when the
//     shell or source reads /dev/stdin.
//
// A substitution inside such text (`bash -c "rm $(pwd)"`) is parsed as
// written. Nesting is capped at MaxDepth levels; deeper is ErrTooDeep.
//
// Shell code a shell reads from somewhere the command line does not show (a
// pipe from another program, a process substitution: `curl … | sh`,
// `bash <(curl …)`, `source <(…)`, a shell inside `>(…)`, the input xargs
// -I puts into `sh -c '… {}'`) is listed as a command with an empty
// Name whose only word stands for that code, with Sources naming the
// programs whose output it is. Code in files (`bash script.sh`, `make`,
// `npm test`) is not read: it is the files' business, not the command
// line's.
//
// # Wrappers
//
// A command that runs another command given as its arguments is peeled off
// and recorded in Wrappers, so Args is the argv of what finally runs:
// command (not with -v/-V, which only look up), builtin, exec, env (its
// options, NAME=value words, -u NAME, -C DIR and -S STRING, whose words are
// split as env splits them), xargs (its options; the command defaults to
// echo and gets more arguments from its input: ArgsFromInput), sudo and doas
// (options, NAME=value), nice, timeout (options and the duration), nohup,
// time, setsid, stdbuf, ionice, chroot (options and the new root),
// eatmydata, busybox and toybox (the applet). find's -exec, -execdir, -ok
// and -okdir commands and watch -x are listed as commands of their own.
// ssh, docker exec and kubectl exec run their commands elsewhere and are
// not followed.
//
// # Words
//
// A Word's Text is the argument the command receives: quotes removed,
// backslash escapes and $'…' decoded, braces expanded (`{r,}m` is two
// words). A part only known when the command runs — a parameter expansion,
// a command or process substitution, arithmetic, an unquoted glob — makes
// the word Dynamic; Text then holds that part as written (`$HOME/bin`).
// An unquoted parameter expansion or command substitution also makes it
// Split: bash splits it into words when it runs, so `rm $f x` may be
// `rm -rf x`, where `rm "$f"` names one file. A command's Name is the base name of its first word, so a path to a
// program is that program (`/bin/rm`, `./rm` and `~/bin/rm` are rm); it is
// known even for `$DIR/rm`, and empty when the last path element itself is
// computed (`$X`, `$(echo rm)`, `r?`).
//
// # Deciding on what is listed
//
// The package reports; callers decide. The guard (package agent) and an
// "allowed prefix" rule should read the results this way:
//
//   - A command with an empty Name runs something nobody can name before
//     it runs. It is rare in honest commands and the usual way to hide a
//     command from a reader, so when no one approves the call (--yolo) the
//     guard refuses it; when someone approves, the prompt shows it. A
//     prefix rule cannot match it.
//   - A Dynamic argument is judged by its static Prefix only. Computed
//     arguments are everywhere in honest commands (`rm "$tmp"`,
//     `git push origin "$branch"`); refusing them would make --yolo
//     useless, and guessing their values would be a list of guesses.
//     The exception is a Split word among rm's options: `rm $FLAGS dir`
//     may be `rm -rf dir`, and the guard refuses it when no one approves
//     (`rm "$f"` and `rm -- $f` name files). The guard stops mistakes and
//     plain evasions; the sandbox, not the guard, is the boundary (a
//     script file walks around any check of the command line).
//   - An Error means the listed commands are only those read before it
//     (bash would run them). A command line that cannot be parsed is
//     refused when no one approves it; otherwise bash reports the error
//     itself, usually before running anything, and the approval prompt
//     shows the line. Limits (IsLimit) are refused either way: nothing
//     honest nests shell code that deep.
//
// # Two parser quirks
//
// mvdan.cc/sh reads a '#' right after a closing quote inside (…) or $(…)
// as the start of a comment, where bash reads it as part of the word; it
// would hide `rm` in `(echo "x"# ; rm -rf /)`. Each such '#' is escaped
// before parsing (a backslash before it means the same to bash), in up to
// a few rounds when one hid another; more is ErrHashes. Its statement
// iterator may yield again after being told to stop, so every iteration
// runs to its end. A NUL byte cannot be passed to bash and is an Error.
package shellcmd
