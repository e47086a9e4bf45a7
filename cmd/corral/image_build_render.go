package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"corral/pkg/apiv1"
)

// outputTail is how much of a step's output --quiet keeps to show if the
// step fails.
const outputTail = 64 << 10

// outputIndent prefixes each line of a step's output.
const outputIndent = "    "

// buildRenderer prints a build's events as plain lines: one per step state,
// the steps' output indented under them, and a summary. It writes progress
// only; the image digest goes to stdout elsewhere.
type buildRenderer struct {
	w       io.Writer
	quiet   bool
	steps   int    // steps in the spec, for "[i/N]" until an event says
	tag     string // for the summary; "" when untagged
	start   time.Time
	now     func() time.Time
	names   map[int]string
	tails   map[int]*tailBuffer // --quiet: each step's last output
	cached  int
	midLine bool // the last output did not end a line
}

func newBuildRenderer(w io.Writer, steps int, tag string, quiet bool) *buildRenderer {
	return &buildRenderer{
		w: w, quiet: quiet, steps: steps, tag: tag, start: time.Now(), now: time.Now,
		names: map[int]string{}, tails: map[int]*tailBuffer{},
	}
}

// Event renders one event.
func (r *buildRenderer) Event(ev apiv1.BuildEvent) {
	if ev.Steps > 0 {
		r.steps = ev.Steps
	}
	switch ev.Type {
	case apiv1.BuildEventStep:
		r.step(ev)
	case apiv1.BuildEventOutput:
		r.output(ev.Step, ev.Data)
	case apiv1.BuildEventDone:
		r.done(ev)
	case apiv1.BuildEventError:
		r.endLine() // the caller prints the error
	}
}

func (r *buildRenderer) step(ev apiv1.BuildEvent) {
	if ev.Name != "" {
		r.names[ev.Step] = ev.Name
	}
	line := r.label(ev.Step) + " " + r.names[ev.Step]
	switch ev.Status {
	case apiv1.StepRunning:
		if !r.quiet {
			r.line(line)
		}
	case apiv1.StepCached:
		if ev.Step > 0 {
			r.cached++
		}
		if !r.quiet {
			r.line(line + ": CACHED")
		}
	case apiv1.StepDone:
		if !r.quiet {
			r.line(fmt.Sprintf("%s: done in %.1fs", line, ev.Seconds))
		}
	case apiv1.StepFailed:
		r.failed(line, ev)
	}
}

// failed prints a failed step's line and, under --quiet, the output kept.
func (r *buildRenderer) failed(line string, ev apiv1.BuildEvent) {
	line += ": FAILED"
	if ev.ExitCode != nil {
		line += fmt.Sprintf(" (exit code %d)", *ev.ExitCode)
	}
	r.line(line)
	t := r.tails[ev.Step]
	if !r.quiet || t == nil {
		return
	}
	kept := t.text()
	if dropped := t.cut + int64(len(t.buf)-len(kept)); dropped > 0 {
		r.line(fmt.Sprintf("%s[%d earlier bytes of output not kept]", outputIndent, dropped))
	}
	r.indent(kept)
	r.endLine()
}

func (r *buildRenderer) label(step int) string {
	if step == 0 {
		return "[base]"
	}
	return fmt.Sprintf("[%d/%d]", step, r.steps)
}

func (r *buildRenderer) output(step int, data []byte) {
	if !r.quiet {
		r.indent(data)
		return
	}
	t := r.tails[step]
	if t == nil {
		t = &tailBuffer{}
		r.tails[step] = t
	}
	t.Write(data)
}

func (r *buildRenderer) done(ev apiv1.BuildEvent) {
	if r.quiet {
		return
	}
	digest := ""
	if ev.Image != nil {
		digest = ev.Image.Digest
	}
	as := ""
	if r.tag != "" {
		as = " as " + r.tag
	}
	r.line(fmt.Sprintf("built %s%s (%d steps, %d cached) in %.1fs", digest, as, r.steps, r.cached, r.now().Sub(r.start).Seconds()))
}

// line prints a status line, first ending any unfinished line of output.
func (r *buildRenderer) line(s string) {
	r.endLine()
	fmt.Fprintln(r.w, s)
}

func (r *buildRenderer) endLine() {
	if r.midLine {
		io.WriteString(r.w, "\n")
		r.midLine = false
	}
}

// indent writes output with each line prefixed by outputIndent.
func (r *buildRenderer) indent(data []byte) {
	for len(data) > 0 {
		if !r.midLine {
			io.WriteString(r.w, outputIndent)
			r.midLine = true
		}
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			r.w.Write(data)
			return
		}
		r.w.Write(data[:i+1])
		r.midLine = false
		data = data[i+1:]
	}
}

// tailBuffer keeps the last outputTail bytes written to it.
type tailBuffer struct {
	buf []byte
	cut int64 // bytes dropped from the front
}

func (t *tailBuffer) Write(p []byte) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - outputTail; over > 0 {
		t.cut += int64(over)
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
	}
}

// text is the output kept, starting at a line's start once some was cut.
func (t *tailBuffer) text() []byte {
	if t.cut == 0 {
		return t.buf
	}
	if i := bytes.IndexByte(t.buf, '\n'); i >= 0 {
		return t.buf[i+1:]
	}
	return t.buf
}
