package shellcmd

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Parse reads a bash command line and lists what it runs. On an error the
// Script still holds the commands read before it: bash runs those before
// it reaches the error.
func Parse(command string) (*Script, error) {
	st := &state{
		s:       &Script{},
		sources: map[syntax.Node][]string{},
		calls:   map[*syntax.CallExpr]*Command{},
		spans:   map[*syntax.Stmt][2]int{},
	}
	if i := strings.IndexByte(command, 0); i >= 0 {
		// No program can be given it: arguments end at a NUL.
		return st.s, &Error{Err: fmt.Errorf("a NUL byte at offset %d", i)}
	}
	w := &walker{state: st, src: command}
	if err := w.parse(ctx{}); err != nil {
		return st.s, &Error{Err: err}
	}
	return st.s, nil
}

// state is shared by the walkers of every level of nested code.
type state struct {
	s *Script
	// sources maps a command or process substitution to the programs
	// that run in it.
	sources map[syntax.Node][]string
	// calls maps a call to the command it became.
	calls map[*syntax.CallExpr]*Command
	// spans maps a statement to the commands listed while walking it.
	spans map[*syntax.Stmt][2]int
}

// walker walks one level of code: the command line, or a code string in it.
type walker struct {
	*state
	src   string
	depth int
}

// ctx is what a command inherits from the statements around it.
type ctx struct {
	fn         string
	background bool
	piped      bool
	stdin      *Input
	redirs     []Redirect
}

func (w *walker) parse(c ctx) error {
	src, err := escapeWordHashes(w.src)
	if err != nil {
		return err
	}
	w.src = src
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	// The loop runs to its end: the parser may yield again after the
	// body asked it to stop, which panics.
	var first error
	for st, err := range p.StmtsSeq(strings.NewReader(w.src)) {
		switch {
		case first != nil:
		case err != nil:
			first = err
		case st != nil:
			first = w.stmt(st, c)
		}
	}
	return first
}

// parsers are reused: a parser is large, and the guard parses every
// bash call (a level of nested code takes its own).
var parsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// escapeWordHashes escapes each '#' that the parser takes for the start
// of a comment where bash reads it as part of a word: after a closing
// quote inside (…) or $(…), the parser ends the line there, and would
// not see `rm` in `(echo "x"# ; rm -rf /)`. A backslash before that '#'
// means the same to bash and to the parser.
func escapeWordHashes(src string) (string, error) {
	if strings.IndexByte(src, '#') < 0 {
		return src, nil // nothing to misread
	}
	p := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true), syntax.RecoverErrors(1000))
	// Each round escapes every '#' the parser misreads; one may have
	// hidden another on the same line.
	for range maxHashRounds + 1 {
		f, _ := p.Parse(strings.NewReader(src), "")
		if f == nil {
			return src, nil
		}
		var at []int
		syntax.Walk(f, func(n syntax.Node) bool {
			if c, ok := n.(*syntax.Comment); ok {
				o := int(c.Hash.Offset())
				if o > 0 && o < len(src) && src[o] == '#' && !strings.ContainsRune(" \t\n;&|()<>", rune(src[o-1])) {
					at = append(at, o)
				}
			}
			return true
		})
		if len(at) == 0 {
			return src, nil
		}
		slices.Sort(at)
		for i := len(at) - 1; i >= 0; i-- {
			src = src[:at[i]] + `\` + src[at[i]:]
		}
	}
	return src, ErrHashes
}

// code parses an argument that cmd runs as shell code, one level deeper.
// Like every argument, it ends at a NUL byte.
func (w *walker) code(cmd *Command, text, via string) error {
	if i := strings.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	return w.input(cmd, text, via)
}

// input parses what cmd reads as shell code on its input, one level deeper.
func (w *walker) input(cmd *Command, text, via string) error {
	cmd.Code = true
	if w.depth+1 > MaxDepth {
		return &Error{Via: via, Err: ErrTooDeep}
	}
	inner := &walker{state: w.state, src: text, depth: w.depth + 1}
	if err := inner.parse(ctx{}); err != nil {
		if _, ok := err.(*Error); ok {
			return err
		}
		return &Error{Via: via, Err: err}
	}
	return nil
}

// unknownCode lists code that cmd runs but the command line does not show.
func (w *walker) unknownCode(cmd *Command, what string, sources []string) error {
	cmd.Code = true
	word := Word{Text: what, Dynamic: true, Sources: sources}
	return w.emit(&Command{Args: []Word{word}, Depth: w.depth + 1, Func: cmd.Func, Background: cmd.Background, Piped: cmd.Piped})
}

func (w *walker) emit(c *Command) error {
	if len(w.s.Commands) >= MaxCommands {
		return ErrTooMany
	}
	w.s.Commands = append(w.s.Commands, c)
	return nil
}

func (w *walker) stmts(sts []*syntax.Stmt, c ctx) error {
	for _, st := range sts {
		if err := w.stmt(st, c); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) stmt(st *syntax.Stmt, c ctx) error {
	if st == nil {
		return nil
	}
	start := len(w.s.Commands)
	defer func() { w.spans[st] = [2]int{start, len(w.s.Commands)} }()
	if st.Background || st.Coprocess || st.Disown {
		c.background = true
	}
	for _, r := range st.Redirs {
		if err := w.substsWord(r.Word, c); err != nil {
			return err
		}
		if err := w.substsWord(r.Hdoc, c); err != nil {
			return err
		}
		rd, in := w.redirect(r)
		w.s.Redirects = append(w.s.Redirects, rd)
		c.redirs = append(slices.Clip(c.redirs), rd)
		if in != nil {
			c.stdin = in
		}
	}
	return w.command(st.Cmd, c)
}

func (w *walker) command(cmd syntax.Command, c ctx) error {
	switch x := cmd.(type) {
	case *syntax.CallExpr:
		return w.call(x, c)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			left, right := c, c
			left.piped, right.piped = true, true
			if err := w.stmt(x.X, left); err != nil {
				return err
			}
			right.stdin = w.output(x.X)
			return w.stmt(x.Y, right)
		}
		if err := w.stmt(x.X, c); err != nil {
			return err
		}
		return w.stmt(x.Y, c)
	case *syntax.Subshell:
		return w.stmts(x.Stmts, c)
	case *syntax.Block:
		return w.stmts(x.Stmts, c)
	case *syntax.IfClause:
		for cl := x; cl != nil; cl = cl.Else {
			if err := w.stmts(cl.Cond, c); err != nil {
				return err
			}
			if err := w.stmts(cl.Then, c); err != nil {
				return err
			}
		}
	case *syntax.WhileClause:
		if err := w.stmts(x.Cond, c); err != nil {
			return err
		}
		return w.stmts(x.Do, c)
	case *syntax.ForClause:
		if x.Loop != nil {
			if err := w.substs(x.Loop, c); err != nil {
				return err
			}
		}
		return w.stmts(x.Do, c)
	case *syntax.CaseClause:
		if err := w.substsWord(x.Word, c); err != nil {
			return err
		}
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				if err := w.substsWord(p, c); err != nil {
					return err
				}
			}
			if err := w.stmts(it.Stmts, c); err != nil {
				return err
			}
		}
	case *syntax.FuncDecl:
		names := []*syntax.Lit{x.Name}
		if x.Name == nil {
			names = x.Names
		}
		name := ""
		for _, n := range names {
			if n != nil {
				w.s.Funcs = append(w.s.Funcs, n.Value)
				name = n.Value
			}
		}
		return w.stmt(x.Body, ctx{fn: name})
	case *syntax.ArithmCmd, *syntax.LetClause, *syntax.TestClause:
		return w.substs(x, c)
	case *syntax.DeclClause:
		return w.decl(x, c)
	case *syntax.TimeClause:
		return w.stmt(x.Stmt, c)
	case *syntax.CoprocClause:
		c.background = true
		return w.stmt(x.Stmt, c)
	case *syntax.TestDecl:
		if err := w.substsWord(x.Description, c); err != nil {
			return err
		}
		return w.stmt(x.Body, c)
	}
	return nil
}

// substsWord walks the substitutions of a word that may be nil.
func (w *walker) substsWord(word *syntax.Word, c ctx) error {
	if word == nil {
		return nil
	}
	return w.substs(word, c)
}

// substs walks the command and process substitutions inside n (not the
// statements n holds: those are walked as statements).
func (w *walker) substs(n syntax.Node, c ctx) error {
	var err error
	syntax.Walk(n, func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		var sts []*syntax.Stmt
		inner := ctx{fn: c.fn}
		switch x := n.(type) {
		case *syntax.CmdSubst:
			sts = x.Stmts
		case *syntax.ProcSubst:
			sts = x.Stmts
			if x.Op == syntax.CmdOut {
				// >(…) reads what the command writes into it.
				inner.stdin = &Input{Dynamic: true}
			}
		default:
			return true
		}
		start := len(w.s.Commands)
		err = w.stmts(sts, inner)
		w.sources[n] = names(w.s.Commands[start:])
		return false
	})
	return err
}

// sourcesIn collects the programs of the substitutions inside n.
func (w *walker) sourcesIn(n syntax.Node) []string {
	var out []string
	syntax.Walk(n, func(n syntax.Node) bool {
		if s, ok := w.sources[n]; ok {
			out = addNames(out, s...)
			return false
		}
		return true
	})
	return out
}

func names(cmds []*Command) []string {
	var out []string
	for _, c := range cmds {
		out = addNames(out, c.Name)
		for _, wr := range c.Wrappers {
			out = addNames(out, wr.Name)
		}
		for _, a := range c.Args {
			out = addNames(out, a.Sources...)
		}
		if c.Stdin != nil {
			out = addNames(out, c.Stdin.Sources...)
		}
	}
	return out
}

func addNames(to []string, names ...string) []string {
	for _, n := range names {
		if n != "" && !slices.Contains(to, n) {
			to = append(to, n)
		}
	}
	return to
}

// redirect describes r and, when it feeds standard input, the input.
func (w *walker) redirect(r *syntax.Redirect) (Redirect, *Input) {
	rd := Redirect{Op: r.Op.String()}
	if r.N != nil {
		rd.Fd = r.N.Value
	}
	stdin := rd.Fd == "" || rd.Fd == "0"
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		body := w.heredoc(r)
		rd.Target = body.Word
		if !stdin {
			return rd, nil
		}
		return rd, &Input{Text: body.Text, Sources: body.Sources}
	case syntax.WordHdoc:
		t := w.word(r.Word)
		rd.Target = t.Word
		if !stdin {
			return rd, nil
		}
		return rd, &Input{Text: t.Text + "\n", Sources: t.Sources}
	}
	t := w.word(r.Word)
	rd.Target = t.Word
	if (r.Op == syntax.RdrIn || r.Op == syntax.RdrInOut) && stdin {
		if t.procSubst {
			return rd, &Input{Dynamic: true, Sources: t.Sources}
		}
		return rd, &Input{File: t.Text}
	}
	return rd, nil
}

// heredoc resolves a here-document's body: literal when its delimiter is
// quoted, with expansions (as written) otherwise.
func (w *walker) heredoc(r *syntax.Redirect) resolved {
	quoted := false
	if r.Word != nil {
		for _, p := range r.Word.Parts {
			if l, ok := p.(*syntax.Lit); !ok || strings.Contains(l.Value, `\`) {
				quoted = true
			}
		}
	}
	var b builder
	if r.Hdoc == nil {
		return b.done()
	}
	for _, p := range r.Hdoc.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			if quoted {
				b.static(l.Value)
			} else {
				b.static(unescapeHeredoc(l.Value))
			}
			continue
		}
		b.dyn(w.raw(p), w.sourcesIn(p))
	}
	return b.done()
}

func (w *walker) call(x *syntax.CallExpr, c ctx) error {
	if err := w.substs(x, c); err != nil {
		return err
	}
	var args []resolved
	for _, a := range x.Args {
		args = append(args, w.words(a)...)
	}
	if len(args) == 0 {
		return nil
	}
	cmd, err := w.run(args, c)
	if cmd != nil {
		w.calls[x] = cmd
	}
	return err
}

// decl lists a declaration (export, local, declare, …) as a command.
func (w *walker) decl(x *syntax.DeclClause, c ctx) error {
	if err := w.substs(x, c); err != nil {
		return err
	}
	args := []Word{{Text: x.Variant.Value, Prefix: x.Variant.Value}}
	for _, a := range x.Args {
		switch {
		case a.Naked && a.Value != nil:
			for _, r := range w.words(a.Value) {
				args = append(args, r.Word)
			}
		case a.Naked && a.Name != nil:
			args = append(args, Word{Text: a.Name.Value, Prefix: a.Name.Value})
		case a.Name != nil:
			lead := a.Name.Value + "="
			if a.Append {
				lead = a.Name.Value + "+="
			}
			var v resolved
			switch {
			case a.Value != nil:
				v = w.word(a.Value)
			case a.Array != nil || a.Index != nil:
				v = resolved{Word: Word{Text: w.raw(a)[len(a.Name.Value):], Dynamic: true}}
				lead = a.Name.Value
			}
			prefix := lead + v.Prefix
			if a.Index != nil {
				prefix = a.Name.Value
			}
			args = append(args, Word{Text: lead + v.Text, Dynamic: v.Dynamic, Prefix: prefix, Sources: v.Sources})
		}
	}
	return w.emit(&Command{Args: args, Name: x.Variant.Value, Redirects: c.redirs, Stdin: c.stdin, Func: c.fn, Background: c.background, Piped: c.piped, Depth: w.depth})
}

// output is what a statement writes to its standard output, as far as the
// command line shows.
func (w *walker) output(st *syntax.Stmt) *Input {
	span := w.spans[st]
	text, known := w.printed(st)
	return &Input{Text: text, Dynamic: !known, Sources: names(w.s.Commands[span[0]:span[1]])}
}

// printed is the text a statement prints, and whether that is all it
// prints: echo, printf, and cat or tee passing on an input the command
// line shows.
func (w *walker) printed(st *syntax.Stmt) (string, bool) {
	if st == nil {
		return "", true
	}
	switch x := st.Cmd.(type) {
	case nil:
		return "", true
	case *syntax.CallExpr:
		cmd := w.calls[x]
		if cmd == nil {
			return "", len(x.Args) == 0
		}
		return printedBy(cmd)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			return w.printed(x.Y)
		}
		a, ok1 := w.printed(x.X)
		b, ok2 := w.printed(x.Y)
		return a + b, ok1 && ok2
	case *syntax.Block:
		return w.printedAll(x.Stmts)
	case *syntax.Subshell:
		return w.printedAll(x.Stmts)
	}
	return "", false
}

func (w *walker) printedAll(sts []*syntax.Stmt) (string, bool) {
	var b strings.Builder
	known := true
	for _, st := range sts {
		t, ok := w.printed(st)
		b.WriteString(t)
		known = known && ok
	}
	return b.String(), known
}

func printedBy(cmd *Command) (string, bool) {
	args := cmd.Argv()
	switch cmd.Name {
	case "echo":
		i := 1
		for i < len(args) && isEchoOption(args[i]) {
			i++
		}
		return bothReadings(strings.Join(args[i:], " ")), true
	case "printf":
		if len(args) > 1 && args[1] == "-v" {
			return "", true
		}
		return bothReadings(strings.Join(args[1:], " ")), true
	case "cat", "tee":
		if cmd.Name == "cat" {
			for _, a := range args[1:] {
				if a != "-" && !strings.HasPrefix(a, "-") {
					return "", false
				}
			}
		}
		if in := cmd.Stdin; in != nil && in.File == "" && !in.Dynamic {
			return in.Text, true
		}
	}
	return "", false
}

// bothReadings is printed text with backslash escapes as written and, when
// that differs, decoded too: bash's echo keeps them, sh's echo, echo -e
// and printf's format decode them.
func bothReadings(s string) string {
	if d := ansiC(s); d != s {
		return s + "\n" + d + "\n"
	}
	return s + "\n"
}

func isEchoOption(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	for _, r := range s[1:] {
		if r != 'n' && r != 'e' && r != 'E' {
			return false
		}
	}
	return true
}
