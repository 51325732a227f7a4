package cli

import (
	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/tools/copymode"
)

// NewCmdHelper builds the hidden `shiro helper` command: the in-container
// side of the sandbox (copymode.HelperMain, the same as the shiro-helper binary's),
// for when shiro copies itself into a container instead of shiro-helper.
func NewCmdHelper(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "helper",
		Short:              "In-container side of the sandbox (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			// Its stdout is the sandbox's channel: byte for byte.
			out, errOut := f.raw()
			if code := copymode.HelperMain(args, f.In, out, errOut); code != 0 {
				return errSilent(code)
			}
			return nil
		},
	}
}
