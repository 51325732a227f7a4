package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/internal/termsafe"
	"github.com/shiroagent/shiro/orchestrator/config"
	"github.com/shiroagent/shiro/orchestrator/store"
)

// NewCmdSessions builds `shiro sessions`: the saved sessions, newest first.
func NewCmdSessions(f *Factory) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List saved sessions, newest first",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			paths, err := config.ResolvePaths(f.LookupEnv)
			if err != nil {
				return err
			}
			st := &store.Store{Dir: paths.SessionsDir()}
			recs, err := st.List(limit)
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				fmt.Fprintln(f.Out, "No saved sessions.")
				return nil
			}
			ids, err := st.IDs()
			if err != nil {
				return err
			}
			short := store.Abbrev(ids) // unique among all saved, not only the listed
			tw := tabwriter.NewWriter(f.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tUPDATED\tMESSAGES\tDIRECTORY\tTITLE")
			for _, r := range recs {
				dir := termsafe.Name(r.Cwd)
				if r.Worktree != "" {
					dir = "agent " + termsafe.Name(r.Worktree) + " (" + termsafe.Name(r.Branch) + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", short[r.ID], ago(r.UpdatedAt), r.MessageCount, dir, termsafe.Name(r.Title))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVarP(&limit, "limit", "n", 20, "how many")
	return cmd
}
