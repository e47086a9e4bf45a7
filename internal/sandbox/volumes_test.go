package sandbox

import (
	"errors"
	"strings"
	"testing"

	"corral/internal/errdefs"
)

func TestValidateVolumes(t *testing.T) {
	for _, c := range []struct {
		vols []VolumeMount
		want string // "" valid, else a fragment of the error
	}{
		{[]VolumeMount{{Name: "data", Path: "/data"}}, ""},
		{[]VolumeMount{{Name: "a.b_c-1", Path: "/home/user/work", ReadOnly: true}, {Name: "b", Path: "/mnt/b"}}, ""},
		{[]VolumeMount{{Name: "data", Path: "/etc/app"}}, ""},
		{[]VolumeMount{{Name: "data", Path: "/"}}, "system directory"},
		{[]VolumeMount{{Name: "data", Path: "/proc"}}, "/proc"},
		{[]VolumeMount{{Name: "data", Path: "/proc/self"}}, "/proc"},
		{[]VolumeMount{{Name: "data", Path: "/dev"}}, "/dev"},
		{[]VolumeMount{{Name: "data", Path: "/sys/fs"}}, "/sys"},
		{[]VolumeMount{{Name: "data", Path: "/.corral/run"}}, "/.corral"},
		{[]VolumeMount{{Name: "data", Path: "/usr"}}, "system directory"},
		{[]VolumeMount{{Name: "data", Path: "data"}}, "absolute"},
		{[]VolumeMount{{Name: "data", Path: "/a/../proc"}}, "clean"},
		{[]VolumeMount{{Name: "data", Path: "/a/"}}, "clean"},
		{[]VolumeMount{{Name: "data", Path: "/a:b"}}, "':'"},
		{[]VolumeMount{{Name: "data", Path: "/a\x00"}}, "clean"},
		{[]VolumeMount{{Name: "..", Path: "/a"}}, "volume name"},
		{[]VolumeMount{{Name: "a..b", Path: "/a"}}, "volume name"},
		{[]VolumeMount{{Name: "a/b", Path: "/a"}}, "volume name"},
		{[]VolumeMount{{Name: "Data", Path: "/a"}}, "volume name"},
		{[]VolumeMount{{Name: "", Path: "/a"}}, "volume name"},
		{[]VolumeMount{{Name: strings.Repeat("a", 64), Path: "/a"}}, "volume name"},
		{[]VolumeMount{{Name: "a", Path: "/a"}, {Name: "a", Path: "/b"}}, "twice"},
		{[]VolumeMount{{Name: "a", Path: "/a"}, {Name: "b", Path: "/a/b"}}, "overlap"},
		{[]VolumeMount{{Name: "a", Path: "/a/b"}, {Name: "b", Path: "/a"}}, "overlap"},
	} {
		s := Spec{Volumes: c.vols}
		err := s.validateVolumes()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.vols, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, errdefs.ErrInvalidArgument)):
			t.Errorf("%+v: %v, want invalid_argument naming %q", c.vols, err, c.want)
		}
	}
	many := make([]VolumeMount, MaxVolumes+1)
	for i := range many {
		many[i] = VolumeMount{Name: "v" + string(rune('a'+i)), Path: "/v" + string(rune('a'+i))}
	}
	if err := (&Spec{Volumes: many}).validateVolumes(); err == nil {
		t.Errorf("%d volumes accepted", len(many))
	}
}
