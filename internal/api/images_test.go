package api

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestAPIPruneSaysWhatItKept: a prune that removes nothing answers with
// what it kept and why; a fresh, unused layer is "recent", with when it
// can go.
func TestAPIPruneSaysWhatItKept(t *testing.T) {
	e := newImageEnv(t)
	l, err := e.c.UploadLayer(context.Background(), bytes.NewReader(layerTar(t, "bin/app", nil)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := e.c.PruneImages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Images) != 0 || len(rep.Layers) != 0 || len(rep.Kept) != 1 {
		t.Fatalf("report %+v: want nothing removed and the layer kept", rep)
	}
	k := rep.Kept[0]
	if k.Kind != "layer" || k.Digest != l.Digest || k.Reason != "recent" || k.Detail == "" || k.Until == nil ||
		k.Until.Before(time.Now().Add(9*time.Minute)) {
		t.Fatalf("kept %+v: want the layer, recent, with a detail and until about ten minutes from now", k)
	}
}
