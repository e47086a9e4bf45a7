package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"unicode/utf8"

	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

// FuzzValidate decodes arbitrary bytes as a build request the way the API
// does (unknown fields refused) and validates it. A refusal must be
// ErrInvalidArgument. An accepted spec must survive a round trip through
// its own JSON: it decodes again, validates again, and gives the same plan,
// step names and cache keys.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"base":"debian:bookworm","steps":[{"apt_install":["cowsay"]},{"run":"echo hi > /x"},` +
			`{"pip_install":["mypkg==1.0"]},{"npm_install":{"packages":["is-number@7.0.0"],"registry":"https://r.test"}},` +
			`{"copy":{"src":"./app","dst":"/opt/app","layer":"` + layerDigest + `"}},{"env":{"A":"1"}},{"workdir":"/opt"},{"user":"1000:1000"}],` +
			`"cmd":["/bin/sh"],"env":{"B":"2"},"workdir":"/","user":"root","cpu":0.5,"memory_mb":512,"step_timeout":60},"tag":"corral/x:1"}`,
		`{"spec":{"base":{"debian":"bookworm","packages":["curl","libc6:amd64=2.36-9"]}}}`,
		`{"spec":{"base":{"image":"docker.io/library/alpine:3"},"steps":[{"pip_install":{"packages":["a"],"index_url":"http://i.test/simple",` +
			`"extra_index_url":["https://e.test"],"find_links":["/w","https://w.test"],"no_index":true}}]}}`,
		`{"spec":{"base":"x:1","steps":[{"run":["a","b"],"user":"nobody"}]}}`,
		`{"spec":{"base":"debian:sid"}}`,
		`{"spec":{"base":{"debian":"bookworm","image":"x"}}}`,
		`{"spec":{"base":"debian:bookworm","steps":[{"apt_install":[]}],"cmd":[]}}`,
		`{"spec":{"base":"debian:bookworm","step_timeout":1e300,"cpu":-1}}`,
		`{"spec":{"base":"debian:bookworm","steps":[{"env":{"A-B":"1"}}]}}`,
		`{"spec":{"base":{"debian":"bookworm","extra":1}}}`,
		`{"spec":{"base":"debian:bookworm"},"tag":"Not A Tag"}`,
		`{"spec":{"base":"debian:bookworm","steps":[{"run":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}]}}`,
		`null`, `{"spec":null}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req apiv1.BuildRequest
		if decodeStrict(data, &req) != nil {
			return
		}
		if err := Validate(Request{Spec: req.Spec, Tag: req.Tag}); err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("refused with %v (%s), want invalid argument", err, errdefs.Code(err))
			}
			return
		}
		p, err := validate(req.Spec)
		if err != nil {
			t.Fatalf("Validate accepted what validate refuses: %v", err)
		}
		for _, s := range p.steps {
			if len(s.name) > maxNameLen || !utf8.ValidString(s.name) {
				t.Fatalf("step name %q: longer than %d bytes or not UTF-8", s.name, maxNameLen)
			}
		}
		b, err := json.Marshal(req.Spec)
		if err != nil {
			t.Fatal(err)
		}
		var again apiv1.BuildSpec
		if err := decodeStrict(b, &again); err != nil {
			t.Fatalf("an accepted spec does not decode from its own JSON: %v\n%s", err, b)
		}
		q, err := validate(again)
		if err != nil {
			t.Fatalf("an accepted spec is refused after a round trip: %v\n%s", err, b)
		}
		if d := planDiff(p, q); d != "" {
			t.Fatalf("the round trip changed the plan's %s\n%s", d, b)
		}
	})
}

// decodeStrict decodes like the API: one JSON value, no unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// planDiff names the first part of the plans that differs, "" if none.
func planDiff(p, q *plan) string {
	switch {
	case p.cpu != q.cpu || p.memoryMB != q.memoryMB || p.stepTimeout != q.stepTimeout:
		return "resources"
	case len(p.steps) != len(q.steps):
		return "step count"
	case !slices.Equal(p.spec.Cmd, q.spec.Cmd) || !maps.Equal(p.spec.Env, q.spec.Env) ||
		p.spec.Workdir != q.spec.Workdir || p.spec.User != q.spec.User:
		return "image config"
	}
	pk, qk := baseKey("base"), baseKey("base")
	for i := range p.steps {
		a, b := p.steps[i], q.steps[i]
		if a.kind != b.kind || a.name != b.name {
			return "steps"
		}
		if pk, qk = chainKey(pk, a.canon), chainKey(qk, b.canon); pk != qk {
			return "cache keys"
		}
	}
	return ""
}
