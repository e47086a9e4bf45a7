package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"corral/pkg/apiv1"
)

// exampleSpec is the spec of the command's help text.
const exampleSpec = `
base: debian:bookworm
steps:
  - apt_install: [cowsay]
  - copy: {src: ./app, dst: /opt/app}
  - run: echo built > /opt/app/built.txt
  - pip_install: {packages: [mypkg], find_links: [/opt/app/wheels], no_index: true}
  - env: {GREETING: hi, PORT: 8080}
  - workdir: /opt/app
  - user: nobody
cmd: [/usr/games/cowsay, hi]
`

func TestParseSpec(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want apiv1.BuildSpec
	}{
		{"example", exampleSpec, apiv1.BuildSpec{
			Base: apiv1.BuildBase{Debian: "bookworm"},
			Steps: []apiv1.BuildStep{
				{AptInstall: []string{"cowsay"}},
				{Copy: &apiv1.CopyStep{Src: "./app", Dst: "/opt/app"}},
				{Run: apiv1.StringList{"echo built > /opt/app/built.txt"}},
				{PipInstall: &apiv1.PipInstall{Packages: []string{"mypkg"}, FindLinks: []string{"/opt/app/wheels"}, NoIndex: true}},
				{Env: map[string]string{"GREETING": "hi", "PORT": "8080"}},
				{Workdir: "/opt/app"},
				{User: "nobody"},
			},
			Cmd: []string{"/usr/games/cowsay", "hi"},
		}},
		{"shorthands", "base: python:3.12\nsteps:\n  - pip_install: [a, b]\n  - npm_install: [c]\n  - run: [x, y]\n",
			apiv1.BuildSpec{Base: apiv1.BuildBase{Image: "python:3.12"}, Steps: []apiv1.BuildStep{
				{PipInstall: &apiv1.PipInstall{Packages: []string{"a", "b"}}},
				{NpmInstall: &apiv1.NpmInstall{Packages: []string{"c"}}},
				{Run: apiv1.StringList{"x", "y"}},
			}}},
		{"base object", "base: {debian: trixie, packages: [curl]}\n",
			apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "trixie", Packages: []string{"curl"}}, Steps: []apiv1.BuildStep{}}},
		{"YAML 1.1 scalars stay text", "base: debian:bookworm\nsteps:\n  - run: [x, y, no]\n  - env: {DEBUG: yes, MODE: 0755, PY: 3.10, N: 8080, E: ''}\n",
			apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "bookworm"}, Steps: []apiv1.BuildStep{
				{Run: apiv1.StringList{"x", "y", "no"}},
				{Env: map[string]string{"DEBUG": "yes", "MODE": "0755", "PY": "3.10", "N": "8080", "E": ""}},
			}}},
		{"typed keys", "base: {image: reg.local/x:1, insecure: true}\ncpu: 1.5\nmemory_mb: 512\nstep_timeout: 60\nsteps:\n  - pip_install: {packages: [a], no_index: true}\n",
			apiv1.BuildSpec{Base: apiv1.BuildBase{Image: "reg.local/x:1", Insecure: true}, CPU: 1.5, MemoryMB: 512, StepTimeout: 60,
				Steps: []apiv1.BuildStep{{PipInstall: &apiv1.PipInstall{Packages: []string{"a"}, NoIndex: true}}}}},
		{"anchors", "base: debian:bookworm\nsteps:\n  - apt_install: &pkgs [curl, git]\n  - apt_install: *pkgs\n",
			apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "bookworm"}, Steps: []apiv1.BuildStep{
				{AptInstall: []string{"curl", "git"}}, {AptInstall: []string{"curl", "git"}},
			}}},
		{"json", `{"base": "debian:bookworm", "steps": [{"run": "true"}], "memory_mb": 512}`,
			apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "bookworm"}, Steps: []apiv1.BuildStep{{Run: apiv1.StringList{"true"}}}, MemoryMB: 512}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSpec([]byte(tc.in))
			if err != nil {
				t.Fatalf("parseSpec: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// aliasBomb expands to 10^6 nodes ("billion laughs", smaller).
const aliasBomb = `base: debian:bookworm
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
`

func TestParseSpecRefused(t *testing.T) {
	cases := []struct {
		name, in string
		msg      []string // each must be in the error
	}{
		{"unknown top-level key", "base: debian:bookworm\nstepz: []\n", []string{`unknown field "stepz"`}},
		{"unknown step", "base: debian:bookworm\nsteps:\n  - run: true\n  - apt_get: [x]\n", []string{"step 2", `unknown field "apt_get"`}},
		{"unknown copy key", "base: debian:bookworm\nsteps:\n  - copy: {src: a, dest: /b}\n", []string{"step 1", `unknown field "dest"`}},
		{"unknown base key", "base: {debain: bookworm}\n", []string{`unknown field "debain"`}},
		{"unknown pip key", "base: debian:bookworm\nsteps:\n  - pip_install: {packages: [a], index: x}\n", []string{"step 1", `unknown field "index"`}},
		{"duplicate key", "base: debian:bookworm\nbase: debian:trixie\n", []string{"line 2", `"base" given twice`}},
		{"string for a number", "base: debian:bookworm\ncpu: two\n", []string{"cpu: want a number, not a string"}},
		{"string for a bool", "base: debian:bookworm\nsteps:\n  - pip_install: {packages: [a], no_index: yes}\n", []string{"step 1", "pip_install.no_index: want true or false, not a string"}},
		{"number for a list", "base: debian:bookworm\nsteps:\n  - apt_install: 3\n", []string{"step 1", "apt_install: want a list, not a string"}},
		{"alias bomb", aliasBomb, []string{"YAML nodes"}},
		{"bad run", "base: debian:bookworm\nsteps:\n  - run: {a: b}\n", []string{"step 1", "a string or a list of strings"}},
		{"no base", "steps: []\n", []string{"base is required"}},
		{"copy without dst", "base: debian:bookworm\nsteps:\n  - copy: {src: a}\n", []string{"step 1", "src and dst"}},
		{"not yaml", "base: [\n", []string{"yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseSpec([]byte(tc.in))
			if err == nil {
				t.Fatal("parseSpec accepted it")
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
}

func TestLoadSpecNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "img.yaml")
	if err := os.WriteFile(p, []byte("base: debian:bookworm\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := loadSpec(p, nil)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Errorf("loadSpec: %v, want an error naming %s and the bogus key", err, p)
	}
	_, err = loadSpec(filepath.Join(t.TempDir(), "corral.yaml"), nil)
	if !os.IsNotExist(errorsUnwrapAll(err)) {
		t.Errorf("loadSpec of a missing file: %v, want not-exist", err)
	}
}

func TestResolvePaths(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "corral.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("base: ./image.tar\nsteps:\n  - copy: {src: ../app, dst: /app}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sf, err := loadSpec(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sf.resolvePath(sf.spec.Steps[0].Copy.Src), filepath.Join(dir, "app"); got != want {
		t.Errorf("copy src resolves to %s, want %s", got, want)
	}
	if got, ok := localBase(sf, sf.spec.Base.Image); !ok || got != filepath.Join(dir, "sub", "image.tar") {
		t.Errorf("base resolves to %s (local %v), want %s", got, ok, filepath.Join(dir, "sub", "image.tar"))
	}
	if got := sf.resolvePath("/abs/x"); got != "/abs/x" {
		t.Errorf("an absolute src resolves to %s", got)
	}

	stdin, err := loadSpec("-", strings.NewReader("base: debian:bookworm\nsteps:\n  - copy: {src: app, dst: /app}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := stdin.resolvePath("app"); got != "app" {
		t.Errorf("with -f -, app resolves to %s, want app (the current directory)", got)
	}
}

func TestLocalBase(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "saved.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sf := &buildSpecFile{dir: dir}
	for ref, want := range map[string]bool{
		"./x.tar": true, "../layout": true, "/abs/layout": true, "saved.tar": true,
		"debian:bookworm": false, "ghcr.io/a/b:1": false, "sha256:abcd": false, "": false,
	} {
		if _, got := localBase(sf, ref); got != want {
			t.Errorf("localBase(%q) = %v, want %v", ref, got, want)
		}
	}
}

// errorsUnwrapAll returns the innermost error of a chain.
func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
