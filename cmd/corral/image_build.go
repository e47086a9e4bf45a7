package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"corral/pkg/apiv1"
	"corral/sdk/go/corral"
)

const imageBuildLong = `Build an image from a spec file (YAML or JSON; -f - reads stdin; default
./corral.yaml). Each step is a cached layer: a step whose inputs have not
changed is not run again (--no-cache runs them all).

  base: debian:bookworm          # or {debian: bookworm, packages: [...]}, or an image ref, or ./image.tar / ./oci-layout-dir
  steps:
    - apt_install: [cowsay]
    - copy: {src: ./app, dst: /opt/app}
    - run: echo built > /opt/app/built.txt
    - pip_install: {packages: [mypkg], find_links: [/opt/app/wheels], no_index: true}
    - env: {GREETING: hi}
    - workdir: /opt/app
    - user: nobody
  cmd: [/usr/games/cowsay, hi]

Steps: apt_install, pip_install and npm_install (a list of packages, or an
object with options), run (a command or a list, run with /bin/sh -ec),
copy, env, workdir and user. cmd, env, workdir and user at the top level
are the image's defaults; cpu, memory_mb and step_timeout (seconds) size
each step's sandbox.

copy sources and a base given as a path are relative to the spec file's
directory (the current directory for -f -). A copy source is sent to the
daemon as a layer, tarred with owners and times dropped, so only a change
of content, names or modes makes the step run again. A base path is a
docker save archive, a tar of an OCI layout, or an OCI layout directory;
it is imported untagged first.

Progress goes to stderr; stdout gets only the image digest.`

// imageBuildFlags are the flags of corral image build.
type imageBuildFlags struct {
	file     string
	tag      string
	noCache  bool
	quiet    bool
	progress string
}

func newImageBuildCmd() *cobra.Command {
	var f imageBuildFlags
	cmd := &cobra.Command{
		Use:   "build [-f SPEC] [-t NAME:TAG]",
		Short: "Build an image from a spec file",
		Long:  imageBuildLong,
		Args:  cobra.NoArgs,
		RunE: withClient(func(ctx context.Context, c *corral.Client, args []string) error {
			return runImageBuild(ctx, c, f, os.Stdin, os.Stdout, os.Stderr)
		}),
	}
	cmd.Flags().StringVarP(&f.file, "file", "f", defaultSpecFile, "spec file (YAML or JSON); - reads stdin")
	cmd.Flags().StringVarP(&f.tag, "tag", "t", "", "name:tag for the image (default: untagged)")
	cmd.Flags().BoolVar(&f.noCache, "no-cache", false, "run every step, cached or not")
	cmd.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "print only a failed step's output, and the digest")
	cmd.Flags().StringVar(&f.progress, "progress", "plain", "progress output: plain or tty (tty prints plain lines for now)")
	return cmd
}

// runImageBuild sends the spec's local inputs (copy sources, a base given
// as a path) to the daemon, then runs the build and renders its events.
func runImageBuild(ctx context.Context, c *corral.Client, f imageBuildFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.progress != "plain" && f.progress != "tty" {
		return fmt.Errorf("--progress %q: want plain or tty", f.progress)
	}
	sf, err := loadSpec(f.file, stdin)
	if err != nil {
		return err
	}
	log := buildLog{w: stderr, quiet: f.quiet}
	if err := importLocalBase(ctx, c, sf, log); err != nil {
		return err
	}
	if err := uploadCopies(ctx, c, sf, log); err != nil {
		return err
	}
	stream, err := c.Build(ctx, apiv1.BuildRequest{Spec: sf.spec, Tag: f.tag, NoCache: f.noCache})
	if err != nil {
		return fmt.Errorf("starting build: %w", err)
	}
	defer stream.Close()
	r := newBuildRenderer(stderr, len(sf.spec.Steps), f.tag, f.quiet)
	img, err := stream.Wait(r.Event)
	r.endLine()
	if err != nil {
		return fmt.Errorf("building %s: %w", sf.name, err)
	}
	if img == nil {
		return fmt.Errorf("building %s: the daemon reported no image", sf.name)
	}
	fmt.Fprintln(stdout, img.Digest)
	return nil
}
