package control

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"corral/pkg/apiv1"
)

func TestClusterRef(t *testing.T) {
	for in, want := range map[string]string{
		"app":                    "app:latest",
		"app:1":                  "app:1",
		"reg:5000/app":           "reg:5000/app:latest",
		"reg:5000/app:2":         "reg:5000/app:2",
		"sha256:" + hex64("a"):   "sha256:" + hex64("a"),
		"test/cluster:1":         "test/cluster:1",
		"localhost:5000/x/y:tag": "localhost:5000/x/y:tag",
	} {
		if got := clusterRef(in); got != want {
			t.Errorf("clusterRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func hex64(c string) string { return strings.Repeat(c, 64) }

// The build watcher passes the stream through unchanged, read a byte at
// a time, and records the done event's image only; a line past the bound
// is not read as an event.
func TestBuildWatcher(t *testing.T) {
	long := `{"type":"done","image":{"digest":"sha256:long","x":"` + strings.Repeat("x", maxEventLine) + `"}}`
	stream := `{"type":"step","step":1}` + "\n" + long + "\n" + `{"type":"done","image":{"digest":"sha256:d1","tags":["app:1"]}}` + "\n"
	var got []apiv1.Image
	w := &buildWatcher{rc: io.NopCloser(iotest.OneByteReader(strings.NewReader(stream))), record: func(img apiv1.Image) { got = append(got, img) }}
	out, err := io.ReadAll(w)
	if err != nil || string(out) != stream {
		t.Fatalf("passed through %d bytes of %d, %v", len(out), len(stream), err)
	}
	if len(got) != 1 || got[0].Digest != "sha256:d1" || len(got[0].Tags) != 1 {
		t.Fatalf("recorded %+v, want sha256:d1 only", got)
	}
}
