package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/orchestrator"
	"github.com/shiroagent/shiro/tools"
)

// ToolOptions are the inputs of `shiro tool NAME JSON`.
type ToolOptions struct {
	Name    string
	Input   string
	Sandbox *SandboxFlags
}

// NewCmdTool builds `shiro tool`: run one tool exactly as the model would.
func NewCmdTool(f *Factory, sf *SandboxFlags, runF func(*ToolOptions) error) *cobra.Command {
	opts := &ToolOptions{Sandbox: sf}
	cmd := &cobra.Command{
		Use:   "tool NAME [JSON]",
		Short: "Run one tool exactly as the model would and print its result",
		Long: `Run one tool exactly as the model would. The result text the model would
see goes to stdout; live command output goes to stderr.

Exit status: 0 for a result, 1 for a tool error, 2 for bad JSON or an
unknown tool. ctrl-c kills a running command's whole process tree.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usagef("want a tool name and its JSON input, e.g. shiro tool bash '{\"command\":\"ls\"}'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			opts.Input = "{}"
			if len(args) == 2 {
				opts.Input = args[1]
			}
			if runF != nil {
				return runF(opts)
			}
			return runTool(cmd, f, opts)
		},
	}
	return cmd
}

func runTool(cmd *cobra.Command, f *Factory, opts *ToolOptions) error {
	tool := tools.Find(tools.Builtins(), opts.Name)
	if tool == nil {
		return usagef("unknown tool %q (see `shiro tools`)", opts.Name)
	}
	input := []byte(opts.Input)
	if !json.Valid(input) {
		var v any
		err := json.Unmarshal(input, &v)
		return usagef("the input for %s is not valid JSON: %v", opts.Name, err)
	}
	if c := bytes.TrimSpace(input); len(c) == 0 || c[0] != '{' {
		return usagef("the input for %s must be a JSON object", opts.Name)
	}
	w, err := f.openWorkspace()
	if err != nil {
		return err
	}
	defer w.Close()
	ws := w.Path()
	cfg, paths, err := f.loadConfig(w, opts.Sandbox, nil)
	if err != nil {
		return err
	}
	sc := f.sandboxConfig(cfg, paths, ws, opts.Sandbox)
	runner, err := orchestrator.NewToolRunner(sc, paths.DataDir, w, func(_ string, chunk []byte) {
		f.ErrOut.Write(chunk) //nolint:errcheck // live output is best effort
	})
	if err != nil {
		return err
	}
	defer runner.Close()
	ctx := cmd.Context()
	res, err := runner.Run(ctx, tool, input)
	if err != nil {
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		return err
	}
	fmt.Fprintln(f.Out, res.Text)
	if res.IsError {
		return errSilent(1)
	}
	return nil
}

// NewCmdTools builds `shiro tools`: each built-in tool with its set and
// whether it asks for approval.
func NewCmdTools(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "tools",
		Short: "List the built-in tools: name, set, free or gated",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			tw := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
			for _, t := range tools.Builtins() {
				gate := "free"
				if tools.IsGated(t) {
					gate = "gated"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name(), t.Set(), gate)
			}
			return tw.Flush()
		},
	}
}
