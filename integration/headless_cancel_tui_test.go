package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/shiroagent/shiro/integration/fakemodel"
)

// TestTUIEscBeforeTheAnswerKeepsTheTurnApart (issue 33): after Esc aborts
// a turn before the model answered, the next prompt goes to the model as
// a user message of its own (the cancelled prompt stays in the history,
// marked as interrupted by the user), so it is answered alone.
func TestTUIEscBeforeTheAnswerKeepsTheTurnApart(t *testing.T) {
	t.Parallel()
	_, ws := tuiSetup(t)
	reached, hold := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	srv := fakemodel.New(t,
		fakemodel.Reply{Reached: reached, Hold: hold, Text: "Never shown."},
		fakemodel.Reply{Text: "Answered the second."},
	)
	s := startTUI(t, ws, srv)
	s.keys("the cancelled question", true)
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatalf("the first request never came:\n%s", s.screen())
	}
	s.press("Escape")
	s.waitIdle(10 * time.Second)
	s.keys("the next question", true)
	s.waitFor("Answered the second.", 20*time.Second)
	reqs := modelRequests(srv)
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	msgs := list(reqs[1].JSON()["messages"])
	if len(msgs) < 3 {
		t.Fatalf("the second request carries %d messages: %s", len(msgs), reqs[1].Body)
	}
	lastMsg := obj(msgs[len(msgs)-1])
	var lastTexts []string
	for _, c := range list(lastMsg["content"]) {
		lastTexts = append(lastTexts, jsonString(obj(c)["text"]))
	}
	if s, ok := lastMsg["content"].(string); ok {
		lastTexts = []string{s}
	}
	if lastMsg["role"] != "user" || len(lastTexts) != 1 || lastTexts[0] != "the next question" {
		t.Errorf("the last user message is %v, want the new prompt alone", lastMsg)
	}
	cancelled := jsonString(msgs[len(msgs)-3])
	if !strings.Contains(cancelled, "the cancelled question") || !strings.Contains(cancelled, "interrupted") {
		t.Errorf("the cancelled prompt is not kept marked: %s", cancelled)
	}
	if role := obj(msgs[len(msgs)-2])["role"]; role != "assistant" {
		t.Errorf("between them: %v", msgs[len(msgs)-2])
	}
	s.quit()
}
