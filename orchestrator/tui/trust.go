package tui

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/huh"
)

// TrustChoice is the answer to the trust form.
type TrustChoice int

// The trust form's answers.
const (
	// TrustRemember trusts the workspace for these asks and remembers it.
	TrustRemember TrustChoice = iota
	// TrustOnce lets the asks happen this session only.
	TrustOnce
	// TrustNo starts without them: no project servers, the default image.
	TrustNo
)

// ErrTrustAborted is returned when the user leaves the trust form with
// ctrl-c: shiro does not start.
var ErrTrustAborted = errors.New("the trust question was not answered")

// TrustQuestion is what the trust form shows: the workspace, each ask on
// its own line (command lines in full), and what changed since an earlier
// decision.
type TrustQuestion struct {
	Workspace string
	Asks      []string
	Changed   []string
}

// text is the form's description.
func (q TrustQuestion) text() string {
	var b strings.Builder
	if len(q.Changed) > 0 {
		b.WriteString("Changed since you trusted it:\n")
		for _, c := range q.Changed {
			fmt.Fprintf(&b, "  %s\n", clean(c))
		}
		b.WriteString("\n")
	}
	b.WriteString("The project config (.shiro/config.json) asks to run:\n")
	for _, a := range q.Asks {
		fmt.Fprintf(&b, "  • %s\n", clean(a))
	}
	b.WriteString("\nMCP servers run inside the sandbox. An image build's RUN steps run as root\ninside the build, with the session's network and limits.\nNothing of this runs until you say yes.")
	return b.String()
}

// AskTrust asks, before the chat starts, whether the workspace's project
// config may do what it asks.
func AskTrust(in io.Reader, out io.Writer, q TrustQuestion) (TrustChoice, error) {
	choice := TrustNo
	form := huh.NewForm(huh.NewGroup(
		huh.NewNote().Title("Trust "+q.Workspace+"?").Description(q.text()),
		huh.NewSelect[TrustChoice]().
			Options(
				huh.NewOption("Trust and remember", TrustRemember),
				huh.NewOption("This time only", TrustOnce),
				huh.NewOption("No (start without them)", TrustNo),
			).
			Value(&choice),
	)).WithTheme(formTheme()).WithInput(in).WithOutput(out).WithShowHelp(true)
	if err := form.Run(); err != nil {
		if errors.Is(err, huh.ErrUserAborted) {
			return TrustNo, ErrTrustAborted
		}
		return TrustNo, err
	}
	return choice, nil
}
