package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/orchestrator/config"
)

func TestPublishFlagsReachTheOverrides(t *testing.T) {
	t.Parallel()
	sf := &SandboxFlags{}
	root := &cobra.Command{Use: "shiro", SilenceUsage: true, SilenceErrors: true, RunE: func(*cobra.Command, []string) error { return nil }}
	sf.bind(root)
	sf.bindPublish(root.Flags())
	root.SetArgs([]string{"--publish", "8080:3000", "--publish", "5173", "--publish-address", "::1"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var o config.Overrides
	sf.overrides(&o)
	if !slices.Equal(o.Publish, []string{"8080:3000", "5173"}) || o.PublishAddress == nil || *o.PublishAddress != "::1" {
		t.Errorf("overrides: publish %q, address %v", o.Publish, o.PublishAddress)
	}
	// Without --publish-address the configured address stands.
	sf2 := &SandboxFlags{}
	root2 := &cobra.Command{Use: "shiro", RunE: func(*cobra.Command, []string) error { return nil }}
	sf2.bindPublish(root2.Flags())
	root2.SetArgs(nil)
	if err := root2.Execute(); err != nil {
		t.Fatal(err)
	}
	var o2 config.Overrides
	sf2.overrides(&o2)
	if o2.PublishAddress != nil || o2.Publish != nil {
		t.Errorf("no flags gave %+v", o2)
	}
}

func TestPublishIsASessionFlag(t *testing.T) {
	t.Parallel()
	f := &Factory{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
	root := NewCmdRoot(f)
	root.SetArgs([]string{"tool", "--publish", "8080:3000", "bash", `{"command":"true"}`})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "publish") {
		t.Errorf("shiro tool --publish: %v, want an unknown flag", err)
	}
}
