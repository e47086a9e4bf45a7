package envd

import (
	"reflect"
	"testing"

	"corral/internal/agentapi"
)

// An upload (temporary file written, renamed over its target) reads as
// envd's in-place write: CREATE and WRITE on the target, the temporary
// file unseen; other events pass as they are.
func TestUploadFold(t *testing.T) {
	ev := func(typ, name string) agentapi.WatchEvent { return agentapi.WatchEvent{Type: typ, Name: name} }
	in := []agentapi.WatchEvent{
		ev(agentapi.WatchCreate, "sub/.corral-upload-1"), ev(agentapi.WatchWrite, "sub/.corral-upload-1"),
		ev(agentapi.WatchChmod, "sub/.corral-upload-1"), ev(agentapi.WatchRename, "sub/.corral-upload-1"),
		ev(agentapi.WatchCreate, "sub/new.txt"),
		ev(agentapi.WatchCreate, "other.txt"), ev(agentapi.WatchRename, "sub/new.txt"), ev(agentapi.WatchCreate, "sub/moved.txt"),
	}
	want := []agentapi.WatchEvent{
		ev(agentapi.WatchCreate, "sub/new.txt"), ev(agentapi.WatchWrite, "sub/new.txt"),
		ev(agentapi.WatchCreate, "other.txt"), ev(agentapi.WatchRename, "sub/new.txt"), ev(agentapi.WatchCreate, "sub/moved.txt"),
	}
	var u uploadFold
	var got []agentapi.WatchEvent
	for _, e := range in {
		got = append(got, u.fold(e)...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("folded:\n%v\nwant:\n%v", got, want)
	}
}
