package tui

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// styles are the look of the UI, made from one lipgloss renderer so that
// tests can fix the colour profile.
type styles struct {
	r *lipgloss.Renderer

	dim, user, tool, toolErr, errText, info, notice lipgloss.Style
	reasoning, header, status, accent, selected     lipgloss.Style
	diffAdd, diffDel, diffCtx, diffHead, cmdName    lipgloss.Style
	approvalBox, infoBox, queue, cursor, warn       lipgloss.Style
	askBox, subBox, taskDone, taskActive, taskBlock lipgloss.Style
	profile                                         termenv.Profile
}

// newStyles builds the styles for output w with the given profile (the
// terminal's when detect is true).
func newStyles(w io.Writer, profile termenv.Profile, detect bool) styles {
	r := lipgloss.NewRenderer(w)
	if !detect {
		r.SetColorProfile(profile)
	}
	r.SetHasDarkBackground(true)
	s := styles{r: r, profile: r.ColorProfile()}
	c := func(code string) lipgloss.TerminalColor { return lipgloss.Color(code) }
	s.dim = r.NewStyle().Faint(true)
	s.user = r.NewStyle().Foreground(c("6"))
	s.tool = r.NewStyle().Foreground(c("5"))
	s.toolErr = r.NewStyle().Foreground(c("1"))
	s.errText = r.NewStyle().Foreground(c("1"))
	s.info = r.NewStyle().Faint(true)
	s.notice = r.NewStyle().Foreground(c("3"))
	s.warn = r.NewStyle().Foreground(c("3"))
	s.reasoning = r.NewStyle().Faint(true).Italic(true)
	s.header = r.NewStyle().Faint(true)
	s.status = r.NewStyle().Faint(true)
	s.accent = r.NewStyle().Foreground(c("6")).Bold(true)
	s.selected = r.NewStyle().Foreground(c("6")).Bold(true)
	s.cmdName = r.NewStyle().Foreground(c("6"))
	s.diffAdd = r.NewStyle().Foreground(c("2"))
	s.diffDel = r.NewStyle().Foreground(c("1"))
	s.diffCtx = r.NewStyle().Faint(true)
	s.diffHead = r.NewStyle().Bold(true)
	s.approvalBox = r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(c("3")).Padding(0, 1)
	s.infoBox = r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(c("6")).Padding(0, 1)
	s.askBox = r.NewStyle().Border(lipgloss.DoubleBorder()).BorderForeground(c("3")).Padding(0, 1)
	s.subBox = r.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(c("5")).Padding(0, 1)
	s.taskDone = r.NewStyle().Faint(true).Strikethrough(true)
	s.taskActive = r.NewStyle().Foreground(c("3")).Bold(true)
	s.taskBlock = r.NewStyle().Foreground(c("1"))
	s.queue = r.NewStyle().Faint(true)
	s.cursor = r.NewStyle().Reverse(true)
	return s
}
