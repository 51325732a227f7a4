package shellcmd_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/shiroagent/shiro/agent/shellcmd"
)

func parse(t *testing.T, command string) *shellcmd.Script {
	t.Helper()
	s, err := shellcmd.Parse(command)
	if err != nil {
		t.Fatalf("parse %q: %v", command, err)
	}
	return s
}

// find returns the first command named name.
func find(t *testing.T, s *shellcmd.Script, name string) *shellcmd.Command {
	t.Helper()
	for _, c := range s.Commands {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s among %s", name, describe(s))
	return nil
}

func describe(s *shellcmd.Script) string {
	var out []string
	for _, c := range s.Commands {
		out = append(out, c.String())
	}
	return strings.Join(out, " | ")
}

func wrapperNames(c *shellcmd.Command) []string {
	var out []string
	for _, w := range c.Wrappers {
		out = append(out, w.Name)
	}
	return out
}

func TestWrappersArePeeled(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, command string
		argv          []string
		wrappers      []string
		fromInput     bool
	}{
		{"command", "command -p rm -f x", []string{"rm", "-f", "x"}, []string{"command"}, false},
		{"builtin", "builtin cd /tmp", []string{"cd", "/tmp"}, []string{"builtin"}, false},
		{"exec with a name", "exec -a name ls -l", []string{"ls", "-l"}, []string{"exec"}, false},
		{"env options and assignments", "env -i -u HOME --chdir=/ A=1 B=2 go test", []string{"go", "test"}, []string{"env"}, false},
		{"env -S", `env -S"go test -v" ./...`, []string{"go", "test", "-v", "./..."}, []string{"env"}, false},
		{"env -S separate with assignment", `env -S "A=1 go vet" x`, []string{"go", "vet", "x"}, []string{"env"}, false},
		{"xargs options", "xargs -0 -I{} -n1 -P 4 cp {} dst", []string{"cp", "{}", "dst"}, []string{"xargs"}, true},
		{"xargs alone runs echo", "xargs", []string{"echo"}, []string{"xargs"}, true},
		{"sudo options and env", "sudo -u bob -g staff -E HOME=/x make install", []string{"make", "install"}, []string{"sudo"}, false},
		{"sudo --", "sudo -n -- make", []string{"make"}, []string{"sudo"}, false},
		{"doas", "doas -u root make", []string{"make"}, []string{"doas"}, false},
		{"nice", "nice -n 19 make", []string{"make"}, []string{"nice"}, false},
		{"nice numeric", "nice -5 make", []string{"make"}, []string{"nice"}, false},
		{"timeout", "timeout --signal=KILL -k 2 30s make", []string{"make"}, []string{"timeout"}, false},
		{"nohup", "nohup make &", []string{"make"}, []string{"nohup"}, false},
		{"time program", "/usr/bin/time -o t.txt -f %e make", []string{"make"}, []string{"time"}, false},
		{"setsid", "setsid -w make", []string{"make"}, []string{"setsid"}, false},
		{"stdbuf", "stdbuf -oL -e0 make", []string{"make"}, []string{"stdbuf"}, false},
		{"ionice", "ionice -c 3 make", []string{"make"}, []string{"ionice"}, false},
		{"chroot", "chroot --userspec=1:1 /srv/root ls", []string{"ls"}, []string{"chroot"}, false},
		{"busybox", "busybox ls", []string{"ls"}, []string{"busybox"}, false},
		{"chain", "sudo env A=1 nice -n 1 timeout 5 nohup ls", []string{"ls"}, []string{"sudo", "env", "nice", "timeout", "nohup"}, false},
		{"path to a wrapper", "/usr/bin/env ls", []string{"ls"}, []string{"env"}, false},
		{"command -v only looks up", "command -v rm", []string{"command", "-v", "rm"}, nil, false},
		{"ionice -p acts on a process", "ionice -c3 -p 42", []string{"ionice", "-c3", "-p", "42"}, nil, false},
		{"env alone prints", "env", []string{"env"}, nil, false},
		{"exec with redirections only", "exec 3>&1", []string{"exec"}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := parse(t, c.command)
			if len(s.Commands) != 1 {
				t.Fatalf("commands: %s", describe(s))
			}
			cmd := s.Commands[0]
			if got := cmd.Argv(); !slices.Equal(got, c.argv) {
				t.Errorf("argv %q, want %q", got, c.argv)
			}
			if got := wrapperNames(cmd); !slices.Equal(got, c.wrappers) {
				t.Errorf("wrappers %q, want %q", got, c.wrappers)
			}
			if cmd.ArgsFromInput != c.fromInput {
				t.Errorf("ArgsFromInput %v", cmd.ArgsFromInput)
			}
			if cmd.Name != baseOf(c.argv[0]) {
				t.Errorf("name %q", cmd.Name)
			}
		})
	}
}

func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func TestWordsAndNames(t *testing.T) {
	t.Parallel()
	type word struct {
		text    string
		dynamic bool
		prefix  string
	}
	cases := []struct {
		name, command, cmdName string
		words                  []word
	}{
		{"quotes and escapes", `\r"m" 'a b' c\ d`, "rm", []word{{"rm", false, "rm"}, {"a b", false, "a b"}, {"c d", false, "c d"}}},
		{"ansi-c", `$'\x72\155' $'a\tb'`, "rm", []word{{"rm", false, "rm"}, {"a\tb", false, "a\tb"}}},
		{"double-quote escapes", `echo "a\$b\"c\\d\e"`, "echo", []word{{"echo", false, "echo"}, {`a$b"c\d\e`, false, `a$b"c\d\e`}}},
		{"path", "/usr/local/bin/go version", "go", []word{{"/usr/local/bin/go", false, "/usr/local/bin/go"}, {"version", false, "version"}}},
		{"tilde path", "~/bin/tool", "tool", []word{{"~/bin/tool", false, "~/bin/tool"}}},
		{"variable directory", "$HOME/bin/tool -v", "tool", []word{{"$HOME/bin/tool", true, ""}, {"-v", false, "-v"}}},
		{"variable command", "$X -rf", "", []word{{"$X", true, ""}, {"-rf", false, "-rf"}}},
		{"braced variable", "${X:-rm} y", "", []word{{"${X:-rm}", true, ""}, {"y", false, "y"}}},
		{"substituted command", "$(echo rm) -rf", "", []word{{"$(echo rm)", true, ""}, {"-rf", false, "-rf"}}},
		{"flag with a variable", "rm -r$X", "rm", []word{{"rm", false, "rm"}, {"-r$X", true, "-r"}}},
		{"glob", "ls *.go", "ls", []word{{"ls", false, "ls"}, {"*.go", true, ""}}},
		{"glob in the name", "/bin/r? x", "", []word{{"/bin/r?", true, ""}, {"x", false, "x"}}},
		{"quoted glob", `ls '*.go'`, "ls", []word{{"ls", false, "ls"}, {"*.go", false, "*.go"}}},
		{"brace expansion", "{r,}m -f", "rm", []word{{"rm", false, "rm"}, {"m", false, "m"}, {"-f", false, "-f"}}},
		{"arithmetic", "echo $((1+2))", "echo", []word{{"echo", false, "echo"}, {"$((1+2))", true, ""}}},
		{"test bracket is not a glob", "[ -f x ]", "[", []word{{"[", false, "["}, {"-f", false, "-f"}, {"x", false, "x"}, {"]", false, "]"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := parse(t, c.command)
			cmd := s.Commands[len(s.Commands)-1]
			if cmd.Name != c.cmdName {
				t.Errorf("name %q, want %q", cmd.Name, c.cmdName)
			}
			if len(cmd.Args) != len(c.words) {
				t.Fatalf("args %q, want %d words", cmd.Argv(), len(c.words))
			}
			for i, w := range c.words {
				got := cmd.Args[i]
				if got.Text != w.text || got.Dynamic != w.dynamic || got.Prefix != w.prefix {
					t.Errorf("word %d: %+v, want %+v", i, got, w)
				}
			}
			if cmd.Static() == slices.ContainsFunc(c.words, func(w word) bool { return w.dynamic }) {
				t.Errorf("Static() = %v", cmd.Static())
			}
		})
	}
}

// TestSplitWords checks which words bash splits when it runs: an unquoted
// expansion may become several words, or an option; a quoted one is one
// word.
func TestSplitWords(t *testing.T) {
	t.Parallel()
	for command, want := range map[string][]bool{
		`rm $f dir`:              {false, true, false},
		`rm ${FLAGS:--rf} dir`:   {false, true, false},
		`rm "$tmp"`:              {false, false},
		`rm "${tmp}" x`:          {false, false, false},
		`rm $(cat list)`:         {false, true},
		`rm "$(cat list)"`:       {false, false},
		`rm -- $dir/x`:           {false, false, true},
		`rm x$f`:                 {false, true},
		`rm 'a'"$b"c`:            {false, false},
		`rm *.o`:                 {false, false},
		`echo $((1+2))`:          {false, false},
		"rm `ls`":                {false, true},
		`rm "a"$b`:               {false, true},
		`rm -r"$X"`:              {false, false},
		`rm {a,$b}`:              {false, false, true},
		`x=$(echo -rf); rm $x .`: {false, true, false},
	} {
		s := parse(t, command)
		cmd := s.Commands[len(s.Commands)-1]
		if len(cmd.Args) != len(want) {
			t.Errorf("%s: args %q, want %d words", command, cmd.Argv(), len(want))
			continue
		}
		for i, w := range want {
			if cmd.Args[i].Split != w {
				t.Errorf("%s: word %d (%s) Split = %v, want %v", command, i, cmd.Args[i].Text, cmd.Args[i].Split, w)
			}
		}
	}
}

func TestSourcesNameTheProgramsWhoseOutputIsUsed(t *testing.T) {
	t.Parallel()
	s := parse(t, `echo "$(sudo curl -s x | tr a b)" ${Y:-$(wget z)}`)
	echo := find(t, s, "echo")
	if got := echo.Args[1].Sources; !slices.Equal(got, []string{"curl", "sudo", "tr"}) {
		t.Errorf("sources %q", got)
	}
	if got := echo.Args[2].Sources; !slices.Equal(got, []string{"wget"}) {
		t.Errorf("sources of a default value %q", got)
	}
}

// TestEveryCommandIsFound lists the commands of compound command lines.
func TestEveryCommandIsFound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, command string
		names         []string
	}{
		{"lists", "a && b || c; d & e", []string{"a", "b", "c", "d", "e"}},
		{"pipeline", "a | b |& c", []string{"a", "b", "c"}},
		{"groups", "(a; { b; }); ! c", []string{"a", "b", "c"}},
		{"if", "if a; then b; elif c; then d; else e; fi", []string{"a", "b", "c", "d", "e"}},
		{"loops", "while a; do b; done; until c; do d; done; for x in $(e); do f; done; for ((i=$(g); i<2; i++)); do h; done", []string{"a", "b", "c", "d", "e", "f", "g", "h"}},
		{"case", "case $(a) in $(b)) c;; *) d;; esac", []string{"a", "b", "c", "d"}},
		{"function", "f() { a; }; function g { b; }", []string{"a", "b"}},
		{"substitutions", "a $(b) `c` <(d) >(e) \"$(f)\"", []string{"b", "c", "d", "e", "f", "a"}},
		{"arithmetic and tests", "(( $(a) )); [[ $(b) == x ]]; let x=$(c)", []string{"a", "b", "c"}},
		{"redirections", "a > $(b) < <(c) <<EOF\n$(d)\nEOF", []string{"b", "c", "d", "a"}},
		{"assignments", "X=$(a) Y=`b` c", []string{"a", "b", "c"}},
		{"declarations", "export X=$(a); local y; readonly Z=1", []string{"a", "export", "local", "readonly"}},
		{"time and coproc", "time a; coproc b", []string{"a", "b"}},
		{"bash -c", "bash -c 'a; b' name arg", []string{"bash", "a", "b"}},
		{"sh -c after options", "sh -e -o pipefail -c 'a | b'", []string{"sh", "a", "b"}},
		{"fish --command", "fish --command='a'", []string{"fish", "a"}},
		{"eval joins its arguments", "eval a ';' b", []string{"eval", "a", "b"}},
		{"here-document into a shell", "bash -s <<EOF\na\nEOF", []string{"bash", "a"}},
		{"here-string into a shell", "zsh <<< 'a; b'", []string{"zsh", "a", "b"}},
		{"printf piped into a shell: escapes kept and decoded", `printf 'a\nb\n' | dash`, []string{"printf", "dash", "anbn", "a", "b"}},
		{"cat of a here-document piped into a shell", "cat <<'EOF' | sh\na\nEOF", []string{"cat", "sh", "a"}},
		{"a shell reading a file", "bash script.sh; sh < script.sh", []string{"bash", "sh"}},
		{"trap", "trap 'a' EXIT", []string{"trap", "a"}},
		{"source of stdin", "source /dev/stdin <<< 'a'", []string{"source", "a"}},
		{"a shell of /dev/fd/0", "bash /dev/fd/0 <<< 'a'", []string{"bash", "a"}},
		{"a computed shell with -c", "$SHELL -ec 'a'", []string{"", "a"}},
		{"alias", "alias x='a | b'", []string{"alias", "a", "b"}},
		{"su -c", "su -l -c 'a' root", []string{"su", "a"}},
		{"script -c", "script -q -c 'a' /dev/null", []string{"script", "a"}},
		{"flock -c", "flock -w 5 /tmp/l -c 'a'", []string{"flock", "a"}},
		{"flock command", "flock /tmp/l a b", []string{"flock", "a"}},
		{"watch", "watch -n 2 'a | b'", []string{"watch", "a", "b"}},
		{"watch -x", "watch -x a b", []string{"watch", "a"}},
		{"find -exec", "find . -exec a {} \\; -execdir b {} +", []string{"find", "a", "b"}},
		{"git -c alias", "git -c alias.x='!a' -c core.sshCommand='b -v' x", []string{"git", "a", "b"}},
		{"git -c plain setting", "git -c user.name=a commit", []string{"git"}},
		{"hash after a quote in a subshell", `(b "x"#; c) # d`, []string{"b", "c"}},
		{"hash after a quote in a substitution", "a $(b 'x'#; c)", []string{"b", "c", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := parse(t, c.command)
			var got []string
			for _, cmd := range s.Commands {
				got = append(got, cmd.Name)
			}
			if !slices.Equal(got, c.names) {
				t.Errorf("commands %q, want %q", got, c.names)
			}
		})
	}
}

func TestUnknownCodeIsListed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, command string
		sources       []string
	}{
		{"a program piped into a shell", "curl -s x | sh", []string{"curl"}},
		{"through a filter", "wget -O- x | tee log | bash", []string{"wget", "tee"}},
		{"a process substitution as the script", "bash <(curl x)", []string{"curl"}},
		{"a process substitution on stdin", "sh < <(curl x)", []string{"curl"}},
		{"source", ". <(kubectl completion bash)", []string{"kubectl"}},
		{"a file piped into a shell", "cat run.sh | sh", []string{"cat"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := parse(t, c.command)
			last := s.Commands[len(s.Commands)-1]
			if last.Name != "" || len(last.Args) != 1 || !last.Args[0].Dynamic || last.Depth != 1 {
				t.Fatalf("last command %+v", last)
			}
			if !slices.Equal(last.Args[0].Sources, c.sources) {
				t.Errorf("sources %q, want %q", last.Args[0].Sources, c.sources)
			}
			if s.Static() {
				t.Error("the script is static")
			}
			if runner := s.Commands[len(s.Commands)-2]; !runner.Code {
				t.Errorf("%s is not marked as running code", runner)
			}
		})
	}
}

func TestCodeFromInputNobodySees(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, command string }{
		{"a shell in >(…)", "echo a > >(sh)"},
		{"xargs -I into sh -c", "ls | xargs -I{} sh -c 'cat {}'"},
		{"xargs --replace into bash -c", "ls | xargs --replace bash -c 'cat {}'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := parse(t, c.command)
			if !slices.ContainsFunc(s.Commands, func(cmd *shellcmd.Command) bool { return cmd.Name == "" && cmd.Depth == 1 }) {
				t.Errorf("no unknown code among %s", describe(s))
			}
		})
	}
	if s := parse(t, "ls | xargs -0 sh -c 'cat \"$@\"' sh"); slices.ContainsFunc(s.Commands, func(cmd *shellcmd.Command) bool { return cmd.Name == "" }) {
		t.Errorf("xargs without -I: %s", describe(s))
	}
}

func TestInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, command, cmd string
		want               shellcmd.Input
	}{
		{"quoted here-document", "psql <<'EOF'\nDROP $X \\$y;\nEOF", "psql", shellcmd.Input{Text: "DROP $X \\$y;\n"}},
		{"here-document with expansions", "psql <<EOF\nDROP $X \\$y;\nEOF", "psql", shellcmd.Input{Text: "DROP $X $y;\n"}},
		{"here-string", `mysql <<< "a b"`, "mysql", shellcmd.Input{Text: "a b\n"}},
		{"echo", "echo -n 'a  b' c | mysql", "mysql", shellcmd.Input{Text: "a  b c\n", Sources: []string{"echo"}}},
		{"a group of echoes", "{ echo a; printf 'b\\n'; } | sqlite3", "sqlite3", shellcmd.Input{Text: "a\nb\\n\nb\n\n", Sources: []string{"echo", "printf"}}},
		{"another program", "git diff | patch", "patch", shellcmd.Input{Dynamic: true, Sources: []string{"git"}}},
		{"a file", "psql < dump.sql", "psql", shellcmd.Input{File: "dump.sql"}},
		{"a process substitution", "psql < <(cat a)", "psql", shellcmd.Input{Dynamic: true, Sources: []string{"cat"}}},
		{"inherited by a group", "{ a; psql; } <<< 'x'", "psql", shellcmd.Input{Text: "x\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			in := find(t, parse(t, c.command), c.cmd).Stdin
			if in == nil {
				t.Fatal("no input")
			}
			if in.Text != c.want.Text || in.Dynamic != c.want.Dynamic || in.File != c.want.File || !slices.Equal(in.Sources, c.want.Sources) {
				t.Errorf("input %+v, want %+v", *in, c.want)
			}
		})
	}
	if in := find(t, parse(t, "ls"), "ls").Stdin; in != nil {
		t.Errorf("a command without input has %+v", *in)
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	s := parse(t, "{ a > out; b; } 2>> err.log; > /dev/sda; c 3>&1 <<< in")
	var got []string
	for _, r := range s.Redirects {
		got = append(got, r.Fd+r.Op+r.Target.Text)
	}
	if want := []string{"2>>err.log", ">out", ">/dev/sda", "3>&1", "<<<in"}; !slices.Equal(got, want) {
		t.Errorf("redirects %q, want %q", got, want)
	}
	writes := []bool{true, true, true, false, false}
	for i, r := range s.Redirects {
		if r.Writes() != writes[i] {
			t.Errorf("%s%s%s: Writes() = %v", r.Fd, r.Op, r.Target.Text, r.Writes())
		}
	}
	if a := find(t, s, "a"); len(a.Redirects) != 2 {
		t.Errorf("a is subject to %+v, want its own and the block's", a.Redirects)
	}
	if b := find(t, s, "b"); len(b.Redirects) != 1 || b.Redirects[0].Target.Text != "err.log" {
		t.Errorf("b is subject to %+v", b.Redirects)
	}
}

func TestFunctionsAndConcurrency(t *testing.T) {
	t.Parallel()
	s := parse(t, ":(){ :|:& }; f() { g; }; :")
	if !slices.Equal(s.Funcs, []string{":", "f"}) {
		t.Errorf("funcs %q", s.Funcs)
	}
	inner := s.Commands[0]
	if inner.Func != ":" || !inner.Background || !inner.Piped {
		t.Errorf("the call inside : is %+v", inner)
	}
	g := find(t, s, "g")
	if g.Func != "f" || g.Background || g.Piped {
		t.Errorf("g is %+v", g)
	}
	if last := s.Commands[len(s.Commands)-1]; last.Func != "" || last.Background {
		t.Errorf("the call of : is %+v", last)
	}
}

// nest wraps a command in bash -c n times.
func nest(t *testing.T, command string, n int) string {
	t.Helper()
	for range n {
		q, err := syntax.Quote(command, syntax.LangBash)
		if err != nil {
			t.Fatal(err)
		}
		command = "bash -c " + q
	}
	return command
}

func TestNestingDepth(t *testing.T) {
	t.Parallel()
	s := parse(t, nest(t, "rm x", shellcmd.MaxDepth))
	last := s.Commands[len(s.Commands)-1]
	if last.Name != "rm" || last.Depth != shellcmd.MaxDepth {
		t.Errorf("innermost command %s at depth %d", last, last.Depth)
	}
	for i, c := range s.Commands[:len(s.Commands)-1] {
		if c.Name != "bash" || c.Depth != i || !c.Code {
			t.Errorf("command %d: %s at depth %d", i, c, c.Depth)
		}
	}
	s, err := shellcmd.Parse(nest(t, "rm x", shellcmd.MaxDepth+1))
	if !errors.Is(err, shellcmd.ErrTooDeep) || !shellcmd.IsLimit(err) {
		t.Fatalf("one level more: %v", err)
	}
	if len(s.Commands) != shellcmd.MaxDepth+1 {
		t.Errorf("the levels read are not kept: %s", describe(s))
	}
}

func TestTooManyCommands(t *testing.T) {
	t.Parallel()
	_, err := shellcmd.Parse(strings.Repeat("true;", shellcmd.MaxCommands+1))
	if !errors.Is(err, shellcmd.ErrTooMany) || !shellcmd.IsLimit(err) {
		t.Errorf("err %v", err)
	}
	if _, err := shellcmd.Parse(strings.Repeat("true;", shellcmd.MaxCommands)); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, command, via, text string
		before                   []string
	}{
		{"unterminated quote", `echo "x`, "", "reached EOF without closing quote", nil},
		{"unterminated if", "if true; then a", "", "must end with", nil},
		{"commands before the error are kept", "a; b\necho \"", "", "reached EOF", []string{"a", "b"}},
		{"inside bash -c", `a; bash -c 'echo "'`, "bash -c", "in the code given to bash -c", []string{"a", "bash"}},
		{"inside eval", `eval 'if'`, "eval", "in the code given to eval", []string{"eval"}},
		{"inside a here-document", "sh <<'EOF'\n(\nEOF", "the input of sh", "the input of sh", []string{"sh"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := shellcmd.Parse(c.command)
			var perr *shellcmd.Error
			if !errors.As(err, &perr) {
				t.Fatalf("err %v", err)
			}
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("message %q does not say %q", err, c.text)
			}
			// The innermost Error names where the text came from.
			for {
				var inner *shellcmd.Error
				if !errors.As(perr.Err, &inner) {
					break
				}
				perr = inner
			}
			if perr.Via != c.via {
				t.Errorf("via %q, want %q", perr.Via, c.via)
			}
			if shellcmd.IsLimit(err) {
				t.Error("a syntax error counts as a limit")
			}
			var got []string
			for _, cmd := range s.Commands {
				got = append(got, cmd.Name)
			}
			if !slices.Equal(got, c.before) {
				t.Errorf("commands read %q, want %q", got, c.before)
			}
		})
	}
}

// TestStaticForPrefixRules shows what an "allowed prefix" rule needs:
// every command with its argv, and whether all of it is known.
func TestStaticForPrefixRules(t *testing.T) {
	t.Parallel()
	cases := []struct {
		command string
		argvs   [][]string
		static  bool
	}{
		{"go test ./... && go vet ./...", [][]string{{"go", "test", "./..."}, {"go", "vet", "./..."}}, true},
		{"sudo -E go test", [][]string{{"go", "test"}}, true},
		{"go test $PKG", [][]string{{"go", "test", "$PKG"}}, false},
		{"git log | head -5", [][]string{{"git", "log"}, {"head", "-5"}}, true},
		{"find . -print0 | xargs -0 wc -l", [][]string{{"find", ".", "-print0"}, {"wc", "-l"}}, false},
		{"bash -c 'make lint'", [][]string{{"bash", "-c", "make lint"}, {"make", "lint"}}, true},
	}
	for _, c := range cases {
		s := parse(t, c.command)
		var got [][]string
		for _, cmd := range s.Commands {
			got = append(got, cmd.Argv())
		}
		if !slices.EqualFunc(got, c.argvs, slices.Equal) {
			t.Errorf("%s: argvs %q, want %q", c.command, got, c.argvs)
		}
		if s.Static() != c.static {
			t.Errorf("%s: Static() = %v", c.command, s.Static())
		}
	}
}

// TestHashesInWords: inside (…) the parser takes a '#' after a quote for a
// comment where bash reads a word; shellcmd escapes it, round after round
// when one hid the next, up to a limit.
func TestHashesInWords(t *testing.T) {
	t.Parallel()
	nested := func(n int) string {
		return strings.Repeat(`(echo "a"# ; `, n) + "rm -rf x" + strings.Repeat(")", n)
	}
	s := parse(t, nested(16))
	if last := s.Commands[len(s.Commands)-1]; last.Name != "rm" || len(s.Commands) != 17 {
		t.Errorf("commands: %s", describe(s))
	}
	if echo := s.Commands[0]; echo.Args[1].Text != "a#" {
		t.Errorf("the word is %q", echo.Args[1].Text)
	}
	if _, err := shellcmd.Parse(nested(17)); !errors.Is(err, shellcmd.ErrHashes) || !shellcmd.IsLimit(err) {
		t.Errorf("err %v", err)
	}
	if s := parse(t, "(a # a comment ; b\n)"); len(s.Commands) != 1 {
		t.Errorf("a real comment: %s", describe(s))
	}
}
