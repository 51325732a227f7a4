package shellcmd

import (
	"errors"
	"fmt"
	"strings"
)

// Limits of a parse.
const (
	// MaxDepth is how deep shell code may nest in shell code (bash -c
	// inside eval inside …).
	MaxDepth = 8
	// MaxCommands caps the commands one command line may list.
	MaxCommands = 10_000
	// maxWrappers caps the wrappers peeled off one command.
	maxWrappers = 32
	// maxHashRounds caps the rounds of escapeWordHashes.
	maxHashRounds = 16
	// maxBraceWords caps the words one brace expansion may produce; a
	// larger one is a dynamic word.
	maxBraceWords = 1_000
)

// Errors of Parse besides syntax errors.
var (
	ErrTooDeep = fmt.Errorf("shell code nested more than %d levels deep", MaxDepth)
	ErrTooMany = fmt.Errorf("more than %d commands", MaxCommands)
	// ErrHashes is a line where '#' inside words hides '#' inside words
	// more than a few times over (see the package doc).
	ErrHashes = errors.New("too many '#' inside words, one hiding the next")
)

// Error is a command line that could not be read. Via says where the
// failing text came from ("" for the command line itself, "bash -c",
// "eval", …).
type Error struct {
	Via string
	Err error
}

func (e *Error) Error() string {
	if e.Via == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("in the code given to %s: %v", e.Via, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// IsLimit reports an error that is about the size or nesting of a command
// line rather than its syntax.
func IsLimit(err error) bool {
	return errors.Is(err, ErrTooDeep) || errors.Is(err, ErrTooMany) || errors.Is(err, ErrHashes)
}

// Script is what a command line runs.
type Script struct {
	// Commands are the simple commands in the order they start: the
	// commands of a substitution before the command whose words hold it,
	// the commands of a code string after the command that runs it.
	Commands []*Command
	// Funcs are the names of the functions the command line declares.
	Funcs []string
	// Redirects are every redirection in the command line, also those of
	// compound commands and of lines without a command (`> /dev/sda`).
	Redirects []Redirect
}

// Static reports whether everything that runs is known before it runs.
func (s *Script) Static() bool {
	for _, c := range s.Commands {
		if !c.Static() {
			return false
		}
	}
	return true
}

// Command is one simple command that would run.
type Command struct {
	// Args is the argv that runs, wrappers peeled off; Args[0] is the
	// program as written (a path stays a path).
	Args []Word
	// Name is the base name of the program ("rm" for /bin/rm, \rm, "rm");
	// empty when it is only known when the command runs, including code
	// a shell reads from a program's output (then Args[0] stands for that
	// code and its Sources name the programs).
	Name string
	// Wrappers are the commands peeled off to reach Args, outermost first.
	Wrappers []Wrapper
	// ArgsFromInput says more arguments come from the input when it runs
	// (xargs).
	ArgsFromInput bool
	// Redirects are the redirections this command is subject to: its own
	// and those of the compound commands around it.
	Redirects []Redirect
	// Stdin is what feeds its standard input when the command line shows
	// it (a pipe, a here-document, a file); nil otherwise.
	Stdin *Input
	// Code says some of its words or its input are shell code, parsed into
	// the commands listed after it (bash -c, eval, a shell reading a
	// here-document, watch, find -exec, git -c alias.x=!…).
	Code bool
	// Func is the function whose body holds the command ("" outside).
	Func string
	// Background and Piped say the command runs alongside others: in the
	// background (&, coproc) or as a stage of a pipeline.
	Background, Piped bool
	// Depth counts the levels of shell code around the command (0 on the
	// command line itself, 1 inside bash -c '…', …).
	Depth int
}

// Argv returns the words' texts.
func (c *Command) Argv() []string {
	out := make([]string, len(c.Args))
	for i, w := range c.Args {
		out[i] = w.Text
	}
	return out
}

// Static reports whether the command and its arguments are known before it
// runs.
func (c *Command) Static() bool {
	if c.Name == "" || c.ArgsFromInput {
		return false
	}
	for _, w := range c.Args {
		if w.Dynamic {
			return false
		}
	}
	for _, wr := range c.Wrappers {
		for _, w := range wr.Args {
			if w.Dynamic {
				return false
			}
		}
	}
	return true
}

// String is the command as a shell line (for messages).
func (c *Command) String() string {
	var b strings.Builder
	for _, wr := range c.Wrappers {
		for _, w := range wr.Args {
			b.WriteString(w.Text)
			b.WriteByte(' ')
		}
	}
	for i, w := range c.Args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.Text)
	}
	return b.String()
}

// Wrapper is a command peeled off another (sudo -u x, env A=1, timeout 5).
type Wrapper struct {
	// Name is the wrapper's base name.
	Name string
	// Args are its words, its own name and options, up to the wrapped
	// command.
	Args []Word
}

// Word is one argument.
type Word struct {
	// Text is the argument as the command receives it; in a Dynamic word
	// the parts only known when it runs are as written.
	Text string
	// Dynamic says part of the word is only known when it runs.
	Dynamic bool
	// Prefix is the static text before the first dynamic part (all of
	// Text when the word is static).
	Prefix string
	// Split says the word holds an unquoted parameter expansion or
	// command substitution, which bash splits into words when it runs:
	// the one word written may become several, or none, and any of them
	// may begin with '-' (`rm $f dir` with f=-rf). A quoted one ("$f")
	// stays one word.
	Split bool
	// Sources name the programs whose output is part of the word (curl in
	// "$(curl -s x)").
	Sources []string
}

// Redirect is one redirection.
type Redirect struct {
	// Op is the operator as written: ">", ">>", ">|", "<", "<>", "<&",
	// ">&", "&>", "&>>", "<<", "<<-", "<<<".
	Op string
	// Fd is the descriptor number written before the operator ("" for the
	// default).
	Fd string
	// Target is the file (or descriptor, or here-string); for a
	// here-document, its body.
	Target Word
}

// Writes reports whether the redirection opens its target for writing.
func (r Redirect) Writes() bool {
	switch r.Op {
	case ">", ">>", ">|", "<>", "&>", "&>>", ">>|", "&>|", "&>>|":
		return true
	case ">&":
		return !isNumber(r.Target.Text) && r.Target.Text != "-"
	}
	return false
}

// Input is what feeds a command's standard input.
type Input struct {
	// Text is what the command line shows of it: a here-document's body or
	// a here-string (as written where dynamic), or what echo or printf
	// piped into the command print.
	Text string
	// Dynamic says (more of) the input comes from a program's output the
	// command line does not show.
	Dynamic bool
	// File is the file redirected into the command (`< f`), if any.
	File string
	// Sources name the programs upstream in the pipe, or in the process
	// substitution it reads.
	Sources []string
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
