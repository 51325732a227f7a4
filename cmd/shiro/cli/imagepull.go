package cli

import (
	"cmp"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/sandbox"
)

// ImagePullOptions are the inputs of `shiro image pull`.
type ImagePullOptions struct {
	Ref string
}

// newCmdImagePull builds `shiro image pull REF`.
func newCmdImagePull(f *Factory, sf *SandboxFlags, runF func(*ImagePullOptions) error) *cobra.Command {
	opts := &ImagePullOptions{}
	return &cobra.Command{
		Use:   "pull REF",
		Short: "Pull an image with the registry's credentials from the docker config",
		Long: `Pull an image reference on the sandbox backend, present or not, with the
credentials the docker CLI would use for its registry: the docker config file
($DOCKER_CONFIG/config.json or ~/.docker/config.json), its auths, credsStore
and credHelpers (docker-credential-NAME on PATH). The credentials go to the
engine only, never into a sandbox. A registry that refuses names where the
credentials came from; ` + "`docker login REGISTRY`" + ` stores new ones.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Ref = args[0]
			if runF != nil {
				return runF(opts)
			}
			name := cmp.Or(f.sandboxSettings(sf).Backend, sandbox.DefaultBackend)
			b, err := sandbox.Lookup(name)
			if err != nil {
				return err
			}
			p, ok := b.(sandbox.ImagePuller)
			if !ok {
				return fmt.Errorf("the %s backend pulls no images itself: its nodes pull them as a pod starts", name)
			}
			id, err := p.PullImage(cmd.Context(), sandbox.ImagePull{Ref: opts.Ref, Progress: f.ErrOut})
			if err != nil {
				return err
			}
			fmt.Fprintf(f.Out, "%s %s\n", opts.Ref, id)
			return nil
		},
	}
}
