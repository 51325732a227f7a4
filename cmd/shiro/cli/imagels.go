package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/sandbox"
)

// newCmdImageLs builds `shiro image ls`: shiro's images and those its
// workspaces' sandboxes run, with digest, size and workspaces.
func newCmdImageLs(f *Factory, sf *SandboxFlags) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List shiro's images and the images its workspaces use, with digest, size and workspaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := f.managers(cmd.Context(), sf)
			if err != nil {
				return err
			}
			defer closeAll(ms)
			list := []sandbox.ImageEntry{}
			for _, m := range ms {
				if l, ok := m.(sandbox.ImageLister); ok {
					entries, err := l.Images(cmd.Context())
					if err != nil {
						return err
					}
					list = append(list, entries...)
				}
			}
			if asJSON {
				enc := json.NewEncoder(termsafe.JSON(f.Out))
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			return writeImageList(f.Out, list)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// writeImageList is `shiro image ls` as a table.
func writeImageList(w io.Writer, list []sandbox.ImageEntry) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No images.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tDIGEST\tSIZE\tWORKSPACES")
	for _, e := range list {
		ref := termsafe.Name(e.Ref)
		if ref == "" {
			ref = "<none>"
		}
		if e.Built {
			ref += " (built by shiro)"
		}
		ws := "-"
		if len(e.Workspaces) > 0 {
			names := make([]string, len(e.Workspaces))
			for i, p := range e.Workspaces {
				names[i] = termsafe.Name(p)
			}
			ws = strings.Join(names, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ref, shortImageDigest(e.Digest), sandbox.HumanBytes(e.Size), ws)
	}
	return tw.Flush()
}

// shortImageDigest is "sha256:" and the first twelve hex digits.
func shortImageDigest(d string) string {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok {
		return d
	}
	return alg + ":" + hex[:min(12, len(hex))]
}
