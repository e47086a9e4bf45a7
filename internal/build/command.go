package build

import (
	"slices"
	"strings"

	"corral/internal/image/store"
	"corral/pkg/apiv1"
)

// stepCommand is what runs in a build sandbox for one step.
type stepCommand struct {
	args []string
	env  map[string]string
	cwd  string
	user string
}

// Scripts of the package steps; packages come after them as "$@", never
// through the shell's parser.
const (
	aptScript = `apt-get update -q && apt-get install -y -q --no-install-recommends "$@" && apt-get clean && rm -rf /var/lib/apt/lists/*`
	npmScript = `npm install --global --cache /tmp/.corral-npm-cache "$@"; rc=$?; rm -rf /tmp/.corral-npm-cache; exit $rc`
)

// command returns the command of a step that runs in a sandbox, in the
// configuration cfg the build has reached. Package managers run as root
// (apt) or as the configured user (pip, npm, run), in the configured
// working directory.
func command(s step, cfg store.ImageConfig) stepCommand {
	c := stepCommand{cwd: cfg.Workdir, user: cfg.User, env: map[string]string{}}
	d := s.def
	switch s.kind {
	case kindApt:
		c.user, c.cwd = "root", "/"
		c.env["DEBIAN_FRONTEND"] = "noninteractive"
		c.args = append([]string{"/bin/sh", "-ec", aptScript, "apt_install"}, d.AptInstall...)
	case kindPip:
		// Environment rather than flags, which older pips reject.
		c.env["PIP_BREAK_SYSTEM_PACKAGES"] = "1"
		c.env["PIP_ROOT_USER_ACTION"] = "ignore"
		c.env["PIP_NO_CACHE_DIR"] = "1"
		c.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
		c.args = pipArgs(d)
	case kindNpm:
		c.env["NPM_CONFIG_UPDATE_NOTIFIER"] = "false"
		c.env["NPM_CONFIG_FUND"] = "false"
		c.env["NPM_CONFIG_AUDIT"] = "false"
		if d.NpmInstall.Registry != "" {
			c.env["NPM_CONFIG_REGISTRY"] = d.NpmInstall.Registry
		}
		c.args = append([]string{"/bin/sh", "-c", npmScript, "npm_install"}, d.NpmInstall.Packages...)
	case kindRun:
		c.args = []string{"/bin/sh", "-ec", strings.Join(d.Run, "\n")}
	case kindWorkdir:
		c.user, c.cwd = "root", "/"
		c.args = []string{"mkdir", "-p", "--", d.Workdir}
	}
	if c.cwd == "" {
		c.cwd = "/"
	}
	return c
}

func pipArgs(d apiv1.BuildStep) []string {
	p := d.PipInstall
	args := []string{"python3", "-m", "pip", "install"}
	if p.IndexURL != "" {
		args = append(args, "--index-url", p.IndexURL)
	}
	for _, u := range p.ExtraIndexURL {
		args = append(args, "--extra-index-url", u)
	}
	for _, l := range p.FindLinks {
		args = append(args, "--find-links", l)
	}
	if p.NoIndex {
		args = append(args, "--no-index")
	}
	return append(append(args, "--"), p.Packages...)
}

// envList turns a map into sorted KEY=VALUE items.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
