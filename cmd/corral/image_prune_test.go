package main

import (
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

// TestPrintPrune: a prune that removed nothing says what it kept and why,
// with the items held by a sandbox or by their age each named.
func TestPrintPrune(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	until := now.Add(7*time.Minute + 30*time.Second)
	rep := apiv1.PruneReport{Images: []string{}, Layers: []string{}, Kept: []apiv1.PruneKept{
		{Kind: "image", Digest: "sha256:" + strings.Repeat("a", 64), Reason: "tagged", Detail: "tagged tools/cow:1"},
		{Kind: "image", Digest: "sha256:" + strings.Repeat("b", 64), Reason: "in_use", Detail: "leased by sb-1234"},
		{Kind: "layer", Digest: "sha256:" + strings.Repeat("c", 64), Reason: "used", Detail: "used by image tools/cow:1"},
		{Kind: "layer", Digest: "sha256:" + strings.Repeat("d", 64), Reason: "used", Detail: "used by image tools/cow:1"},
		{Kind: "layer", Digest: "sha256:" + strings.Repeat("e", 64), Reason: "recent", Until: &until,
			Detail: "unused, added 2m30s ago; unused layers are kept 10m0s, for builds in progress"},
	}}
	var b strings.Builder
	printPrune(&b, rep, now)
	want := `removed 0 images and 0 layers, freed 0 MiB
kept 1 image: tagged (corral image rm untags)
kept 2 layers: used by kept images
kept image sha256:bbbbbbbbbbbb: in use, leased by sb-1234
kept layer sha256:eeeeeeeeeeee: unused, added 2m30s ago; unused layers are kept 10m0s, for builds in progress (prunable in 7m30s)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
