package gvisor

import (
	"context"
	"strings"
	"testing"

	"corral/internal/runtime"
)

func TestStartDialEcho(t *testing.T) {
	r := newRuntime(t)
	ref := start(t, r, runtime.Resources{})
	out := sh(t, r, ref, "echo hello; id -u; hostname; echo $CORRAL_TEST; cat /proc/1/cmdline | tr '\\0' ' '")
	t.Logf("%q", out)
	if !strings.HasPrefix(out, "hello\n0\nbox-"+ref.ID+"\n1\n/.corral/corral agent") {
		t.Errorf("unexpected output %q", out)
	}
	st, err := r.Status(context.Background(), ref)
	if err != nil || st != runtime.StateRunning {
		t.Errorf("Status = %v, %v; want running", st, err)
	}
}
