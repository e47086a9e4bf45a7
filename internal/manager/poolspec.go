package manager

import (
	"strconv"
	"strings"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// ParseWarmPool reads a warm pool from comma-separated key=value pairs:
// size (required), runtime, image, cpu, cpu_limit, memory_mb,
// memory_limit_mb, disk_mb; keys left out take the create defaults.
func ParseWarmPool(s string) (WarmPoolConfig, error) {
	var c WarmPoolConfig
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || v == "" {
			return c, errdefs.Invalid("warm pool", "%q is not key=value", kv)
		}
		var err error
		switch k {
		case "size":
			c.Size, err = strconv.Atoi(v)
		case "runtime":
			c.Spec.Runtime = v
		case "image":
			c.Spec.Image = v
		case "cpu":
			c.Spec.CPU, err = strconv.ParseFloat(v, 64)
		case "cpu_limit":
			c.Spec.CPULimit, err = strconv.ParseFloat(v, 64)
		case "memory_mb":
			c.Spec.MemoryMB, err = strconv.ParseInt(v, 10, 64)
		case "memory_limit_mb":
			c.Spec.MemoryLimitMB, err = strconv.ParseInt(v, 10, 64)
		case "disk_mb":
			c.Spec.DiskMB, err = strconv.ParseInt(v, 10, 64)
		default:
			return c, errdefs.Invalid("warm pool", "unknown key %q (want size, runtime, image, cpu, cpu_limit, memory_mb, memory_limit_mb, disk_mb)", k)
		}
		if err != nil {
			return c, errdefs.Invalid("warm pool", "%s: %q is not a number", k, v)
		}
	}
	if c.Size < 1 || c.Size > 256 {
		return c, errdefs.Invalid("warm pool", "size must be 1 to 256, got %d", c.Size)
	}
	spec := c.Spec
	if err := spec.Normalize(); err != nil {
		return c, err
	}
	return c, nil
}

// sameShape reports whether two normalized specs start the same sandbox
// (a pool's identity).
func sameShape(a, b sandbox.Spec) bool {
	return a.Runtime == b.Runtime && a.Image == b.Image && a.CPU == b.CPU && a.CPULimit == b.CPULimit &&
		a.MemoryMB == b.MemoryMB && a.MemoryLimitMB == b.MemoryLimitMB && a.DiskMB == b.DiskMB
}
