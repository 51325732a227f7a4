package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shiroagent/shiro/images"
	"github.com/shiroagent/shiro/sandbox/docker"
)

// ImageOptions are the inputs of `shiro image build`.
type ImageOptions struct {
	Offline   bool
	Online    bool
	IfMissing bool
}

// NewCmdImage builds `shiro image`.
func NewCmdImage(f *Factory, runF func(*ImageOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build the default sandbox image",
		Args:  cobra.NoArgs,
	}
	opts := &ImageOptions{}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build the default sandbox image (" + images.Tag() + ")",
		Long: `Build the default sandbox image through the Docker Engine API.

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
			eng, err := docker.Connect(cmd.Context())
			if err != nil {
				return err
			}
			defer eng.Close()
			if opts.IfMissing {
				ok, err := eng.ImageExists(cmd.Context(), images.Tag())
				if err != nil {
					return err
				}
				if ok {
					fmt.Fprintln(f.Out, images.Tag())
					return nil
				}
			}
			bo := docker.BuildOptions{Progress: f.ErrOut}
			switch {
			case opts.Offline:
				bo.Offline = true
				err = eng.BuildDefaultImage(cmd.Context(), bo)
			case opts.Online:
				err = eng.BuildDefaultImage(cmd.Context(), bo)
			default:
				err = eng.BuildDefaultImageAuto(cmd.Context(), bo)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(f.Out, images.Tag())
			return nil
		},
	}
	build.Flags().BoolVar(&opts.Offline, "offline", false, "make the image from Debian packages (debootstrap), without pulling a base image")
	build.Flags().BoolVar(&opts.Online, "online", false, "only build the Dockerfile (no offline fallback)")
	build.Flags().BoolVar(&opts.IfMissing, "if-missing", false, "do nothing when the image is already present")
	cmd.AddCommand(build)
	return cmd
}
