package agent_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/shiroagent/shiro/agent"
	"github.com/shiroagent/shiro/agent/llm"
)

func TestPrefixes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		want    [][]string
	}{
		{"go test ./...", [][]string{{"go", "test"}}},
		{"ls -la", [][]string{{"ls"}}},
		{"cat main.go", [][]string{{"cat"}}},
		{"go build ./... && go test -race ./pkg", [][]string{{"go", "build"}, {"go", "test"}}},
		{"go test ./a; go test ./b", [][]string{{"go", "test"}}},
		{"/usr/local/go/bin/go vet", [][]string{{"go", "vet"}}},
		{"npm run build | tee log", [][]string{{"npm", "run"}, {"tee", "log"}}}, // a word like a subcommand narrows the grant
		{"$CMD test", nil},             // the program is only known when it runs
		{"sudo go test", nil},          // a wrapper
		{"find . | xargs grep x", nil}, // arguments from the input
		{"a; b; c; d; e", nil},         // too many to grant at once
		{"echo 'unclosed", nil},        // cannot be parsed
		{"bash -c 'go test'", [][]string{{"bash"}, {"go", "test"}}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			got := agent.Prefixes(tt.command)
			if !slices.EqualFunc(got, tt.want, slices.Equal[[]string]) {
				t.Errorf("Prefixes(%q) = %q, want %q", tt.command, got, tt.want)
			}
		})
	}
}

func TestPrefixesAllow(t *testing.T) {
	t.Parallel()
	granted := [][]string{{"go", "test"}, {"ls"}}
	tests := []struct {
		command string
		want    bool
	}{
		{"go test -run TestX ./pkg", true},
		{"ls", true},
		{"ls -la && go test ./...", true},
		{"\\go test", true},
		{"go build ./...", false},
		{"go test ./... && rm -rf build", false},
		{"go test $(rm -rf build)", false}, // the substitution runs rm
		{"go test; bash -c 'rm x'", false}, // and so does bash -c
		{"sudo go test", false},            // wrapped
		{"go $T", false},                   // the subcommand is only known when it runs
		{"go tests", false},                // another word
		{"l\\s", true},                     // bash reads it as ls
		{"echo go test", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			if got := agent.PrefixesAllow(granted, tt.command); got != tt.want {
				t.Errorf("PrefixesAllow(%q) = %v, want %v", tt.command, got, tt.want)
			}
		})
	}
	if agent.PrefixesAllow(nil, "ls") {
		t.Error("no grants allowed a command")
	}
}

func TestAlwaysPrefixAllowsLaterCommandsWithThatPrefixOnly(t *testing.T) {
	t.Parallel()
	var asked []agent.ApprovalRequest
	approver := agent.ApproverFunc(func(_ context.Context, req agent.ApprovalRequest) (agent.Decision, error) {
		asked = append(asked, req)
		if len(asked) == 1 {
			return agent.AlwaysPrefix, nil
		}
		return agent.Deny, nil
	})
	bash := &fakeTool{name: "bash", gated: true}
	cmd := func(id, c string) llm.Part {
		b, _ := json.Marshal(map[string]string{"command": c})
		return call(id, "bash", string(b))
	}
	h := newHarness(t, agent.Config{Tools: tools(bash), Approver: approver, Plugins: []agent.Plugin{agent.GuardPlugin()}},
		step{calls: []llm.Part{cmd("c1", "go test ./...")}},
		step{calls: []llm.Part{cmd("c2", "go test -run X ./pkg"), cmd("c3", "go build ./..."), cmd("c4", "go test ./... && git push --force")}},
		step{text: "done"})
	if err := h.send(t, "test"); err != nil {
		t.Fatal(err)
	}
	if len(asked) < 2 || !slices.EqualFunc(asked[0].Prefixes, [][]string{{"go", "test"}}, slices.Equal[[]string]) {
		t.Fatalf("requests %+v", asked)
	}
	if asked[1].Input == nil || string(asked[1].Input) != `{"command":"go build ./..."}` {
		t.Errorf("the second request is %s, want go build (go test -run was allowed)", asked[1].Input)
	}
	if bash.count() != 2 {
		t.Errorf("bash ran %d times, want 2 (the granted prefix twice)", bash.count())
	}
	if got := h.agent.AllowedPrefixes("bash"); !slices.EqualFunc(got, [][]string{{"go", "test"}}, slices.Equal[[]string]) {
		t.Errorf("AllowedPrefixes %q", got)
	}
	// The line with a force push was not asked about: the guard refused it
	// before anyone was asked.
	if len(asked) != 2 {
		t.Errorf("%d approvals asked, want 2", len(asked))
	}
}
