package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox"
)

// ImageOptions are the inputs of `shiro image build`.
type ImageOptions struct {
	Offline   bool
	Online    bool
	IfMissing bool
}

// NewCmdImage builds `shiro image`.
func NewCmdImage(f *Factory, sf *SandboxFlags, runF func(*ImageOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build, pull and list sandbox images",
		Args:  cobra.NoArgs,
	}
	opts := &ImageOptions{}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the default sandbox image (" + images.Tag() + ")",
		Long: `Build the default sandbox image on the sandbox backend (the Docker engine
by default; --backend chooses another).

By default the Dockerfile is built, and when its base image cannot be pulled
(no registry) the same image is made from Debian packages instead
(debootstrap + import, needs root). --online and --offline force one way.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Offline && opts.Online {
				return usagef("--online and --offline exclude each other")
			}
			if runF != nil {
				return runF(opts)
			}
			b, err := sandbox.Lookup(f.sandboxSettings(sf).Backend)
			if err != nil {
				return err
			}
			ref, err := b.BuildImage(cmd.Context(), sandbox.ImageBuild{IfMissing: opts.IfMissing, Offline: opts.Offline, Online: opts.Online, Progress: f.ErrOut})
			if err != nil {
				return err
			}
			fmt.Fprintln(f.Out, ref)
			return nil
		},
	}
	build.Flags().BoolVar(&opts.Offline, "offline", false, "make the image from Debian packages (debootstrap), without pulling a base image")
	build.Flags().BoolVar(&opts.Online, "online", false, "only build the Dockerfile (no offline fallback)")
	build.Flags().BoolVar(&opts.IfMissing, "if-missing", false, "do nothing when the image is already present")
	cmd.AddCommand(build, newCmdImagePull(f, sf, nil), newCmdImageLs(f, sf))
	return cmd
}
