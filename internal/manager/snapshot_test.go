package manager

import (
	"errors"
	"strings"
	"testing"
	"time"

	"corral/internal/errdefs"
	"corral/internal/sandbox"
)

// A copy takes the snapshot's image, runtime and resources (asking for
// others names the field) and inherits what the caller leaves unset.
func TestFromSnapshot(t *testing.T) {
	rec := &sandbox.Snapshot{ID: "snap-aaaaaaaaaaaaaaaa", Spec: sandbox.Spec{
		Runtime: "vm", Image: "app:1", ImageDigest: "sha256:" + strings.Repeat("1", 64), CPU: 2, MemoryMB: 1024,
		MemoryLimitMB: 1024, DiskMB: 2048, Timeout: time.Hour, Env: map[string]string{"A": "1"}, Workdir: "/srv",
	}}
	for field, spec := range map[string]sandbox.Spec{
		"runtime":    {Runtime: "gvisor"},
		"image":      {Image: "other:2"},
		"memory_mb":  {MemoryMB: 512},
		"cpu":        {CPU: 1},
		"disk_mb":    {DiskMB: 1},
		"entrypoint": {Entrypoint: []string{"sleep", "1"}},
	} {
		err := fromSnapshot(&spec, rec)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	spec := sandbox.Spec{Runtime: "vm", Image: "app:1", Name: "copy", Timeout: time.Minute}
	if err := fromSnapshot(&spec, rec); err != nil {
		t.Fatal(err)
	}
	if spec.Image != rec.Spec.ImageDigest || spec.MemoryMB != 1024 || spec.CPU != 2 || spec.DiskMB != 2048 ||
		spec.Timeout != time.Minute || spec.Env["A"] != "1" || spec.Workdir != "/srv" || spec.Name != "copy" ||
		spec.FromSnapshot != rec.ID {
		t.Errorf("filled in: %+v", spec)
	}
	if err := spec.Normalize(); err != nil {
		t.Errorf("the filled-in spec does not normalize: %v", err)
	}
}
