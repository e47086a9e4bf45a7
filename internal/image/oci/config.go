package oci

import (
	"fmt"
	"strings"
	"unicode"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// maxWorkdir bounds an image's working directory, as a sandbox's.
const maxWorkdir = 4096

// checkConfig validates the parts of an image's run config that sandboxes
// use, before any layer is fetched: what a sandbox would otherwise accept
// at create and fail on at its first exec (a relative working directory, a
// user that is not a user) is refused at import or pull, naming the
// config's field.
func checkConfig(c v1.Config) error {
	if w := c.WorkingDir; w != "" && (!strings.HasPrefix(w, "/") || len(w) > maxWorkdir || hasControl(w)) {
		return errdefs.Invalid("config.WorkingDir", "must be an absolute path, got %q", truncate(w))
	}
	if u := c.User; u != "" && !sandbox.ValidUser(u) {
		return errdefs.Invalid("config.User", "%q is not a user (a name or uid, optionally with :group or :gid)", truncate(u))
	}
	for i, e := range c.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.IndexFunc(k, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return errdefs.Invalid(fmt.Sprintf("config.Env[%d]", i), "%q is not KEY=VALUE", truncate(e))
		}
		if strings.ContainsRune(e, 0) {
			return errdefs.Invalid(fmt.Sprintf("config.Env[%d]", i), "holds a NUL byte")
		}
	}
	if err := sandbox.ValidateArgv("config.Entrypoint", c.Entrypoint, true); err != nil {
		return err
	}
	if len(c.Entrypoint) == 0 {
		return sandbox.ValidateArgv("config.Cmd", c.Cmd, true)
	}
	return sandbox.ValidateArgv("config.Cmd", append([]string{"x"}, c.Cmd...), true)
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}
