package sandbox

import (
	"path"
	"regexp"
	"strings"

	"corral/internal/errdefs"
)

// VolumeMount attaches a named volume (package volume) to a sandbox at
// Path, read-write unless ReadOnly.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// MaxVolumes bounds the volumes of one sandbox.
const MaxVolumes = 16

var volumeNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// CheckVolumeName returns an invalid-argument error naming field unless n
// can name a volume: [a-z0-9][a-z0-9_.-]{0,62} without "..", so a name is
// always one safe path component.
func CheckVolumeName(field, n string) error {
	if !volumeNameRE.MatchString(n) || strings.Contains(n, "..") {
		return errdefs.Invalid(field, "%q is not a volume name (want [a-z0-9][a-z0-9_.-]{0,62}, no \"..\")", n)
	}
	return nil
}

// reservedMountPaths are guest directories a volume may not cover or sit
// inside: the kernel's file systems, the agent's own directory, and the
// directories a system cannot run without.
var (
	noMountInside = []string{"/proc", "/dev", "/sys", "/.corral"}
	noMountAt     = []string{"/", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/etc", "/boot", "/run", "/var", "/tmp/.X11-unix"}
)

// validateVolumes checks the volume mounts: names, absolute clean paths
// that cover no system directory, no name or path twice, none inside
// another.
func (s *Spec) validateVolumes() error {
	if len(s.Volumes) > MaxVolumes {
		return errdefs.Invalid("volumes", "at most %d, got %d", MaxVolumes, len(s.Volumes))
	}
	for i, v := range s.Volumes {
		if err := CheckVolumeName("volumes", v.Name); err != nil {
			return err
		}
		if err := checkMountPath(v.Path); err != nil {
			return err
		}
		for _, w := range s.Volumes[:i] {
			if w.Name == v.Name {
				return errdefs.Invalid("volumes", "volume %q is named twice", v.Name)
			}
			if within(v.Path, w.Path) || within(w.Path, v.Path) {
				return errdefs.Invalid("volumes", "paths %q and %q overlap", w.Path, v.Path)
			}
		}
	}
	return nil
}

func checkMountPath(p string) error {
	if len(p) > 1024 || !strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.ContainsAny(p, "\x00:,\n") {
		return errdefs.Invalid("volumes", "path %q must be absolute and clean, without ':', ',' or control characters", p)
	}
	for _, r := range noMountAt {
		if p == r {
			return errdefs.Invalid("volumes", "path %q is a system directory", p)
		}
	}
	for _, r := range noMountInside {
		if within(p, r) {
			return errdefs.Invalid("volumes", "path %q is in %s, which is the system's", p, r)
		}
	}
	return nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
