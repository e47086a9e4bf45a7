package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"corral/pkg/apiv1"
)

func stepEv(step int, name, status string) apiv1.BuildEvent {
	return apiv1.BuildEvent{Type: apiv1.BuildEventStep, Step: step, Steps: 3, Name: name, Status: status}
}

func outEv(step int, data string) apiv1.BuildEvent {
	return apiv1.BuildEvent{Type: apiv1.BuildEventOutput, Step: step, Stream: "stdout", Data: []byte(data)}
}

func doneEv(step int, name string, secs float64) apiv1.BuildEvent {
	ev := stepEv(step, name, apiv1.StepDone)
	ev.Seconds = secs
	return ev
}

func failEv(step, code int) apiv1.BuildEvent {
	ev := stepEv(step, "", apiv1.StepFailed)
	ev.ExitCode = &code
	return ev
}

func TestRenderBuild(t *testing.T) {
	success := []apiv1.BuildEvent{
		stepEv(0, "debian:bookworm", apiv1.StepCached),
		stepEv(1, "apt_install cowsay", apiv1.StepCached),
		stepEv(2, "run echo hi", apiv1.StepRunning),
		outEv(2, "hi\nhal"), outEv(2, "f line\n"),
		doneEv(2, "run echo hi", 3.24),
		stepEv(3, "copy ./app", apiv1.StepRunning),
		outEv(3, "no newline"),
		doneEv(3, "", 0.5),
		{Type: apiv1.BuildEventDone, Image: &apiv1.Image{Digest: "sha256:abc"}},
	}
	failure := []apiv1.BuildEvent{
		stepEv(0, "debian:bookworm", apiv1.StepRunning),
		outEv(0, "fetching\n"),
		doneEv(0, "debian:bookworm", 40),
		stepEv(1, "run false", apiv1.StepRunning),
		outEv(1, "about to fail\n"), outEv(1, "failing"),
		failEv(1, 2),
		{Type: apiv1.BuildEventError, Error: &apiv1.ErrorDetail{Code: "failed_precondition", Message: "step 1 failed"}},
	}
	cases := []struct {
		name   string
		events []apiv1.BuildEvent
		tag    string
		quiet  bool
		want   string
	}{
		{"success", success, "demo:1", false, `[base] debian:bookworm: CACHED
[1/3] apt_install cowsay: CACHED
[2/3] run echo hi
    hi
    half line
[2/3] run echo hi: done in 3.2s
[3/3] copy ./app
    no newline
[3/3] copy ./app: done in 0.5s
built sha256:abc as demo:1 (3 steps, 1 cached) in 7.0s
`},
		{"success untagged, quiet", success, "", true, ""},
		{"success untagged", success[len(success)-1:], "", false, "built sha256:abc (3 steps, 0 cached) in 7.0s\n"},
		{"failure", failure, "", false, `[base] debian:bookworm
    fetching
[base] debian:bookworm: done in 40.0s
[1/3] run false
    about to fail
    failing
[1/3] run false: FAILED (exit code 2)
`},
		{"failure, quiet", failure, "", true, `[1/3] run false: FAILED (exit code 2)
    about to fail
    failing
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			r := newBuildRenderer(&buf, 3, tc.tag, tc.quiet)
			r.now = func() time.Time { return r.start.Add(7 * time.Second) }
			for _, ev := range tc.events {
				r.Event(ev)
			}
			r.endLine()
			if got := buf.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// TestRenderQuietKeepsTail: --quiet shows at most the last outputTail bytes
// of a failed step, from a line's start, and says how much it left out.
func TestRenderQuietKeepsTail(t *testing.T) {
	var buf bytes.Buffer
	r := newBuildRenderer(&buf, 1, "", true)
	r.Event(stepEv(1, "run noisy", apiv1.StepRunning))
	line := strings.Repeat("x", 99) + "\n"
	for range 2 * outputTail / len(line) {
		r.Event(outEv(1, line))
	}
	r.Event(outEv(1, "last words\n"))
	r.Event(failEv(1, 1))
	out := buf.String()
	if !strings.HasPrefix(out, "[1/3] run noisy: FAILED (exit code 1)\n    [") || !strings.Contains(out, "earlier bytes of output not kept]\n") {
		t.Errorf("no failure line and cut note at the start:\n%.200s", out)
	}
	if !strings.HasSuffix(out, "    last words\n") {
		t.Errorf("the last output is missing:\n...%s", out[len(out)-200:])
	}
	if len(out) > outputTail+outputTail/20+200 {
		t.Errorf("printed %d bytes, want about %d", len(out), outputTail)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[2:] {
		if l != "    "+strings.Repeat("x", 99) && l != "    last words" {
			t.Fatalf("a cut line was printed: %q", l)
		}
	}
}
