package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// npmEnviron is the environment the npm projects of these tests run in:
// npm's shared cache, no audit, funding or update notices, then extra.
func npmEnviron(extra ...string) []string {
	env := append(os.Environ(), "npm_config_cache="+npmCache(), "npm_config_audit=false", "npm_config_fund=false",
		"npm_config_update_notifier=false")
	// Clipped: callers append their own variables to one result more than
	// once, and those appends must not share a backing array.
	return slices.Clip(append(env, extra...))
}

// npmInstalls are the npm projects installed in this run, by directory:
// tests that share a project (run in parallel) install it once, since
// npm ci removes node_modules first.
var npmInstalls sync.Map // dir -> *npmInstall

type npmInstall struct {
	once sync.Once
	out  []byte
	err  error
}

// npmCI installs the pinned packages of the npm project in dir (npm ci),
// once a run, failing t with npm's output.
func npmCI(ctx context.Context, t *testing.T, npm, dir string, env []string) {
	t.Helper()
	v, _ := npmInstalls.LoadOrStore(dir, &npmInstall{})
	in := v.(*npmInstall)
	in.once.Do(func() {
		ci := exec.CommandContext(ctx, npm, "ci", "--no-progress")
		ci.Dir, ci.Env = dir, env
		in.out, in.err = ci.CombinedOutput()
	})
	if in.err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, in.err, in.out)
	}
}

// npmCache is npm's cache: the machine's shared one for root, kept
// between runs.
func npmCache() string {
	if os.Geteuid() == 0 {
		return "/var/cache/corral-npm"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".npm")
}
