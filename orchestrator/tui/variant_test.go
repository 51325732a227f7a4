package tui

import (
	"strings"
	"testing"
)

func TestAgentAndThinkCommands(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100)
	l := f.loop()
	if v := f.view(); !strings.Contains(v, "agent: default  thinking: medium") || !strings.Contains(v, "default/medium") {
		t.Fatalf("header and status bar lack the variant:\n%s", v)
	}
	l.typeText("/agent fast")
	l.key(key(enter))
	if p := f.printed(); !strings.Contains(p, `Unknown agent "fast". Available: default, quick, deep, plan, review`) {
		t.Errorf("printed:\n%s", p)
	}
	l.typeText("/think lots")
	l.key(key(enter))
	if p := f.printed(); !strings.Contains(p, `Unknown thinking level "lots". Available: off, low, medium, high, max`) {
		t.Errorf("printed:\n%s", p)
	}
	l.typeText("/agent review")
	l.key(key(enter))
	if !strings.Contains(f.view(), "review/high") {
		t.Errorf("status bar after /agent review:\n%s", f.view())
	}
	l.typeText("/think")
	l.key(key(enter))
	v := f.view()
	if !strings.Contains(v, "Pick a thinking level") {
		t.Fatalf("no picker:\n%s", v)
	}
	for _, level := range []string{"off", "low", "medium", "high (current)", "max"} {
		if !strings.Contains(v, level) {
			t.Errorf("the picker lacks %q:\n%s", level, v)
		}
	}
	l.key(key(down))
	l.key(key(enter))
	if !strings.Contains(f.view(), "review/max") {
		t.Errorf("status bar after picking max:\n%s", f.view())
	}
	if f.sess.Variant().Thinking != "max" {
		t.Errorf("the session's level is %s", f.sess.Variant().Thinking)
	}
}
