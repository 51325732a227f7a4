package tui

import (
	"strings"
	"testing"
)

func TestTrustQuestionShowsEachAskAndTheChange(t *testing.T) {
	q := TrustQuestion{
		Workspace: "/w",
		Asks:      []string{"MCP server s: node b.js", "image: build ./Dockerfile FROM x"},
		Changed:   []string{"changed MCP server s: was node a.js, now node b.js"},
	}
	text := q.text()
	for _, want := range append(append([]string{"RUN steps run as root"}, q.Asks...), q.Changed...) {
		if !strings.Contains(text, want) {
			t.Errorf("the form lacks %q:\n%s", want, text)
		}
	}
}
