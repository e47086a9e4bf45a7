package control

import (
	"context"
	"encoding/json"
	"testing"

	"corral/internal/cluster/store"
	"corral/pkg/apiv1"
)

// A snapshot sent to a node that lacks its image has the image fetched
// there first (the node would refuse the import), when the cluster knows
// the image.
func TestSnapshotImageSentFirst(t *testing.T) {
	st, a, b := twoSnapNodes(t)
	const digest = "sha256:" + "cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34cd34"
	a.image, a.hasImage, b.image = digest, true, digest
	if err := st.RecordImage(context.Background(), store.NodeImage{Node: "a", Digest: digest, Tags: []string{"tools:latest"}}); err != nil {
		t.Fatal(err)
	}
	srv := controlFor(t, st, testJoin)
	parent := placeOn(t, srv, "a", "b")
	status, body := call(t, srv, "POST", "/v1/sandboxes/"+parent+"/snapshots/memory", testToken, "")
	var sn apiv1.Snapshot
	if err := json.Unmarshal([]byte(body), &sn); status != 201 || err != nil {
		t.Fatalf("snapshot: %d %s", status, body)
	}
	call(t, srv, "POST", "/v1/cluster/nodes/a/drain", testToken, "")
	status, body = call(t, srv, "POST", "/v1/sandboxes", testToken, `{"from_snapshot": "`+sn.ID+`"}`)
	if status != 201 || !b.hasImage {
		t.Fatalf("a create from a snapshot on a node without its image: %d %s (b fetched it: %v)", status, body, b.hasImage)
	}
	if ls, err := st.SnapshotLocations(context.Background(), sn.ID); err != nil || len(ls) != 2 {
		t.Fatalf("the snapshot's locations: %+v, %v; want a and b", ls, err)
	}
}
