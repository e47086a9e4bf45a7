package build

import (
	"errors"
	"strings"
	"testing"

	"corral/internal/errdefs"
	"corral/pkg/apiv1"
)

const layerDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestValidateRefuses(t *testing.T) {
	deb := apiv1.BuildBase{Debian: "bookworm"}
	steps := func(s ...apiv1.BuildStep) apiv1.BuildSpec { return apiv1.BuildSpec{Base: deb, Steps: s} }
	for _, tt := range []struct {
		name  string
		spec  apiv1.BuildSpec
		field string
	}{
		{"no base", apiv1.BuildSpec{}, "base"},
		{"two bases", apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "bookworm", Image: "x:1"}}, "base"},
		{"unknown suite", apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "sid"}}, "base.debian"},
		{"packages on an image base", apiv1.BuildSpec{Base: apiv1.BuildBase{Image: "x:1", Packages: []string{"curl"}}}, "base.packages"},
		{"shell in a base package", apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "bookworm", Packages: []string{"curl;reboot"}}}, "base.packages[0]"},
		{"empty step", steps(apiv1.BuildStep{}), "steps[0]"},
		{"two kinds in a step", steps(apiv1.BuildStep{Run: []string{"true"}, User: "nobody"}), "steps[0]"},
		{"option as an apt package", steps(apiv1.BuildStep{AptInstall: []string{"-oDebug=1"}}), "steps[0].apt_install[0]"},
		{"no apt packages", steps(apiv1.BuildStep{AptInstall: []string{}}), "steps[0].apt_install"},
		{"option as a pip package", steps(apiv1.BuildStep{PipInstall: &apiv1.PipInstall{Packages: []string{"--index-url=http://x"}}}), "steps[0].pip_install.packages[0]"},
		{"ftp index", steps(apiv1.BuildStep{PipInstall: &apiv1.PipInstall{Packages: []string{"a"}, IndexURL: "ftp://x"}}), "steps[0].pip_install.index_url"},
		{"relative find-links", steps(apiv1.BuildStep{PipInstall: &apiv1.PipInstall{Packages: []string{"a"}, FindLinks: []string{"wheels"}}}), "steps[0].pip_install.find_links[0]"},
		{"newline in an npm package", steps(apiv1.BuildStep{NpmInstall: &apiv1.NpmInstall{Packages: []string{"a\nb"}}}), "steps[0].npm_install.packages[0]"},
		{"blank run", steps(apiv1.BuildStep{Run: []string{"  "}}), "steps[0].run[0]"},
		{"copy without a layer", steps(apiv1.BuildStep{Copy: &apiv1.CopyStep{Src: "a", Dst: "/a"}}), "steps[0].copy.layer"},
		{"copy to a relative path", steps(apiv1.BuildStep{Copy: &apiv1.CopyStep{Dst: "a", Layer: layerDigest}}), "steps[0].copy.dst"},
		{"bad env name", steps(apiv1.BuildStep{Env: map[string]string{"A-B": "1"}}), "steps[0].env"},
		{"relative workdir", steps(apiv1.BuildStep{Workdir: "opt"}), "steps[0].workdir"},
		{"user with a shell", steps(apiv1.BuildStep{User: "root;id"}), "steps[0].user"},
		{"image user", apiv1.BuildSpec{Base: deb, User: "a b"}, "user"},
		{"tiny memory", apiv1.BuildSpec{Base: deb, MemoryMB: 16}, "memory_mb"},
		{"huge step timeout", apiv1.BuildSpec{Base: deb, StepTimeout: 1e9}, "step_timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validate(tt.spec)
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("err = %v, want invalid argument", err)
			}
			if !strings.HasPrefix(err.Error(), tt.field+":") && !strings.Contains(err.Error(), tt.field+":") {
				t.Errorf("err = %q does not name %s", err, tt.field)
			}
		})
	}
	if err := Validate(Request{Spec: apiv1.BuildSpec{Base: deb}, Tag: "Not A Tag"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("a bad tag: %v", err)
	}
}

func TestValidateAccepts(t *testing.T) {
	p, err := validate(apiv1.BuildSpec{
		Base: apiv1.BuildBase{Debian: "bookworm", Packages: []string{"curl", "libc6:amd64=2.36-9"}},
		Steps: []apiv1.BuildStep{
			{AptInstall: []string{"cowsay"}},
			{Copy: &apiv1.CopyStep{Src: "./app", Dst: "/opt/app", Layer: layerDigest}},
			{Run: []string{"echo hi", "touch /x"}},
			{PipInstall: &apiv1.PipInstall{Packages: []string{"mypkg==1.0"}, FindLinks: []string{"/opt/app/wheels", "https://example.test/w"}, NoIndex: true}},
			{NpmInstall: &apiv1.NpmInstall{Packages: []string{"is-number@7.0.0"}}},
			{Env: map[string]string{"GREETING": "hi"}},
			{Workdir: "/opt/app"},
			{User: "1000:1000"},
		},
		Cmd: []string{"/usr/games/cowsay", "hi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"apt_install cowsay", "copy ./app -> /opt/app", "run echo hi; touch /x", "pip_install mypkg==1.0",
		"npm_install is-number@7.0.0", "env GREETING", "workdir /opt/app", "user 1000:1000"}
	for i, s := range p.steps {
		if s.name != names[i] {
			t.Errorf("step %d is named %q, want %q", i, s.name, names[i])
		}
	}
	if p.cpu != defaultCPU || p.memoryMB != defaultMemoryMB || p.stepTimeout != defaultStepTimeout {
		t.Errorf("defaults: %+v", p)
	}
}

// The cache key follows content: a copy step's client path does not count,
// its layer does; a changed step changes its key and every later one.
func TestKeys(t *testing.T) {
	keys := func(steps ...apiv1.BuildStep) []string {
		p, err := validate(apiv1.BuildSpec{Base: apiv1.BuildBase{Debian: "bookworm"}, Steps: steps})
		if err != nil {
			t.Fatal(err)
		}
		k := baseKey("debian")
		var out []string
		for _, s := range p.steps {
			k = chainKey(k, s.canon)
			out = append(out, string(k))
		}
		return out
	}
	copyStep := func(src, layer string) apiv1.BuildStep {
		return apiv1.BuildStep{Copy: &apiv1.CopyStep{Src: src, Dst: "/app", Layer: layer}}
	}
	run := func(cmd string) apiv1.BuildStep { return apiv1.BuildStep{Run: []string{cmd}} }
	other := "sha256:" + strings.Repeat("f", 64)

	a := keys(copyStep("./app", layerDigest), run("make"), run("test"))
	if b := keys(copyStep("/elsewhere/app", layerDigest), run("make"), run("test")); strings.Join(a, ",") != strings.Join(b, ",") {
		t.Error("the client's copy path changed the keys")
	}
	b := keys(copyStep("./app", other), run("make"), run("test"))
	if a[0] == b[0] || a[1] == b[1] || a[2] == b[2] {
		t.Error("new copied content kept a key")
	}
	c := keys(copyStep("./app", layerDigest), run("make all"), run("test"))
	if a[0] != c[0] || a[1] == c[1] || a[2] == c[2] {
		t.Errorf("changing step 2 should change keys 2 and 3 only: %v vs %v", a, c)
	}
}
