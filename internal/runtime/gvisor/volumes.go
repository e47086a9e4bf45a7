package gvisor

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"corral/internal/runtime"
)

// volumeMounts are the sandbox's volumes as bind mounts, which the gofer
// serves from the host's mount of each volume. runsc's
// --file-access-mounts defaults to shared: the sentry revalidates what it
// cached of a bind mount against the host, so a sandbox sees what another
// sandbox or the host wrote there (file contents at once, a changed
// directory at its next lookup). nosuid and nodev: a file a sandbox wrote
// is never a setuid or device file for another.
func volumeMounts(vols []runtime.Volume) []specs.Mount {
	var out []specs.Mount
	for _, v := range vols {
		opts := []string{"bind", "nosuid", "nodev"}
		if v.ReadOnly {
			opts = append(opts, "ro")
		} else {
			opts = append(opts, "rw")
		}
		out = append(out, specs.Mount{Destination: v.GuestPath, Type: "bind", Source: v.HostDir, Options: opts})
	}
	return out
}
