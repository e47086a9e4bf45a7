package build

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/image/store"
	"corral/internal/sandbox"
	"corral/pkg/apiv1"
)

// Bounds and defaults of a spec.
const (
	maxSteps           = 100
	maxPackages        = 256
	maxPackageLen      = 256
	maxRunCommands     = 64
	maxRunCommandBytes = 64 << 10
	maxEnv             = 256
	maxNameLen         = 80
	defaultCPU         = 2.0
	defaultMemoryMB    = 2048
	defaultStepTimeout = 30 * time.Minute
	// supportedSuite is the Debian suite a base can be built from: the
	// daemon's own base root filesystem is one.
	supportedSuite = "bookworm"
)

var (
	debPackageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]*(:[a-z0-9]+)?(=[A-Za-z0-9.+~:-]+)?$`)
	envKeyRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// stepKind names what a step does.
type stepKind string

const (
	kindApt     stepKind = "apt_install"
	kindPip     stepKind = "pip_install"
	kindNpm     stepKind = "npm_install"
	kindRun     stepKind = "run"
	kindCopy    stepKind = "copy"
	kindEnv     stepKind = "env"
	kindWorkdir stepKind = "workdir"
	kindUser    stepKind = "user"
)

// step is one validated step.
type step struct {
	kind stepKind
	def  apiv1.BuildStep
	// canon is the canonical JSON the cache key covers.
	canon []byte
	// name is what progress shows.
	name string
}

// plan is a validated spec.
type plan struct {
	spec        apiv1.BuildSpec
	steps       []step
	cpu         float64
	memoryMB    int64
	stepTimeout time.Duration
}

// validate checks every field of a spec and returns its plan. Errors are
// ErrInvalidArgument naming the field ("steps[2].apt_install[0]").
func validate(spec apiv1.BuildSpec) (*plan, error) {
	p := &plan{spec: spec, cpu: spec.CPU, memoryMB: spec.MemoryMB}
	if err := validateBase(spec.Base); err != nil {
		return nil, err
	}
	if len(spec.Steps) > maxSteps {
		return nil, errdefs.Invalid("steps", "at most %d steps, not %d", maxSteps, len(spec.Steps))
	}
	for i, def := range spec.Steps {
		st, err := validateStep(fmt.Sprintf("steps[%d]", i), def)
		if err != nil {
			return nil, err
		}
		p.steps = append(p.steps, st)
	}
	if err := validateImageConfig(spec); err != nil {
		return nil, err
	}
	if err := p.resources(spec); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *plan) resources(spec apiv1.BuildSpec) error {
	if p.cpu == 0 {
		p.cpu = defaultCPU
	}
	if p.memoryMB == 0 {
		p.memoryMB = defaultMemoryMB
	}
	if p.cpu < 0.1 || p.cpu > sandbox.MaxCPU {
		return errdefs.Invalid("cpu", "must be between 0.1 and %g, got %g", sandbox.MaxCPU, p.cpu)
	}
	if p.memoryMB < 128 || p.memoryMB > sandbox.MaxMemoryMB {
		return errdefs.Invalid("memory_mb", "must be between 128 and %d, got %d", sandbox.MaxMemoryMB, p.memoryMB)
	}
	p.stepTimeout = defaultStepTimeout
	if spec.StepTimeout != 0 {
		p.stepTimeout = time.Duration(spec.StepTimeout * float64(time.Second))
	}
	if p.stepTimeout < time.Second || p.stepTimeout > sandbox.MaxTimeout {
		return errdefs.Invalid("step_timeout", "must be between 1 and %d seconds", int(sandbox.MaxTimeout.Seconds()))
	}
	return nil
}

func validateBase(b apiv1.BuildBase) error {
	switch {
	case b.Debian != "" && b.Image != "":
		return errdefs.Invalid("base", "set debian or image, not both")
	case b.Debian != "":
		if b.Debian != supportedSuite {
			return errdefs.Invalid("base.debian", "suite %q is not supported (supported: %s)", truncate(b.Debian), supportedSuite)
		}
		return validatePackages("base.packages", b.Packages, false)
	case b.Image != "":
		if len(b.Packages) > 0 {
			return errdefs.Invalid("base.packages", "only a debian base takes packages; add an apt_install step")
		}
		if len(b.Image) > 512 || strings.ContainsAny(b.Image, "\x00 \t\r\n") {
			return errdefs.Invalid("base.image", "%q is not an image reference", truncate(b.Image))
		}
		return nil
	}
	return errdefs.Invalid("base", "required: debian: SUITE or image: REF")
}

func validateStep(field string, def apiv1.BuildStep) (step, error) {
	st, n := step{def: def}, 0
	set := func(k stepKind, isSet bool) {
		if isSet {
			st.kind = k
			n++
		}
	}
	set(kindApt, def.AptInstall != nil)
	set(kindPip, def.PipInstall != nil)
	set(kindNpm, def.NpmInstall != nil)
	set(kindRun, def.Run != nil)
	set(kindCopy, def.Copy != nil)
	set(kindEnv, def.Env != nil)
	set(kindWorkdir, def.Workdir != "")
	set(kindUser, def.User != "")
	if n != 1 {
		return st, errdefs.Invalid(field, "a step sets exactly one of apt_install, pip_install, npm_install, run, copy, env, workdir, user (this one sets %d)", n)
	}
	field += "." + string(st.kind)
	if err := st.check(field); err != nil {
		return st, err
	}
	canon := def
	if canon.Copy != nil {
		c := *canon.Copy
		c.Src = "" // the client's path is not content
		canon.Copy = &c
	}
	b, err := json.Marshal(canon)
	if err != nil {
		return st, err
	}
	st.canon = b
	st.name = describe(st.kind, def)
	return st, nil
}

func (s *step) check(field string) error {
	d := s.def
	switch s.kind {
	case kindApt:
		return validatePackages(field, d.AptInstall, true)
	case kindPip:
		return validatePip(field, *d.PipInstall)
	case kindNpm:
		return validateNpm(field, *d.NpmInstall)
	case kindRun:
		return validateRun(field, d.Run)
	case kindCopy:
		return validateCopy(field, *d.Copy)
	case kindEnv:
		return validateEnv(field, d.Env)
	case kindWorkdir:
		return validateAbsPath(field, d.Workdir)
	case kindUser:
		return validateUser(field, d.User)
	}
	return nil
}

func validatePackages(field string, pkgs []string, required bool) error {
	if required && len(pkgs) == 0 {
		return errdefs.Invalid(field, "name at least one package")
	}
	if len(pkgs) > maxPackages {
		return errdefs.Invalid(field, "at most %d packages", maxPackages)
	}
	for i, p := range pkgs {
		if len(p) > maxPackageLen || !debPackageRE.MatchString(p) {
			return errdefs.Invalid(fmt.Sprintf("%s[%d]", field, i), "%q is not a Debian package name (name[:arch][=version])", truncate(p))
		}
	}
	return nil
}

// validateArgs checks packages handed to pip or npm as arguments: no
// option injection, no control characters.
func validateArgs(field string, pkgs []string) error {
	if len(pkgs) == 0 || len(pkgs) > maxPackages {
		return errdefs.Invalid(field, "name 1 to %d packages", maxPackages)
	}
	for i, p := range pkgs {
		if p == "" || len(p) > maxPackageLen || strings.HasPrefix(p, "-") || hasControl(p) {
			return errdefs.Invalid(fmt.Sprintf("%s[%d]", field, i), "%q is not a package (empty, too long, starts with '-' or holds control characters)", truncate(p))
		}
	}
	return nil
}

func validatePip(field string, p apiv1.PipInstall) error {
	if err := validateArgs(field+".packages", p.Packages); err != nil {
		return err
	}
	if p.IndexURL != "" {
		if err := validateURL(field+".index_url", p.IndexURL); err != nil {
			return err
		}
	}
	for i, u := range p.ExtraIndexURL {
		if err := validateURL(fmt.Sprintf("%s.extra_index_url[%d]", field, i), u); err != nil {
			return err
		}
	}
	for i, l := range p.FindLinks {
		f := fmt.Sprintf("%s.find_links[%d]", field, i)
		if strings.HasPrefix(l, "/") {
			if err := validateAbsPath(f, l); err != nil {
				return err
			}
			continue
		}
		if err := validateURL(f, l); err != nil {
			return errdefs.Invalid(f, "want an absolute path in the image or an http(s) URL, got %q", truncate(l))
		}
	}
	return nil
}

func validateNpm(field string, n apiv1.NpmInstall) error {
	if err := validateArgs(field+".packages", n.Packages); err != nil {
		return err
	}
	if n.Registry != "" {
		return validateURL(field+".registry", n.Registry)
	}
	return nil
}

func validateRun(field string, cmds []string) error {
	if len(cmds) == 0 || len(cmds) > maxRunCommands {
		return errdefs.Invalid(field, "give 1 to %d commands", maxRunCommands)
	}
	for i, c := range cmds {
		if strings.TrimSpace(c) == "" || len(c) > maxRunCommandBytes || strings.ContainsRune(c, 0) {
			return errdefs.Invalid(fmt.Sprintf("%s[%d]", field, i), "a command is 1 to %d bytes without NUL", maxRunCommandBytes)
		}
	}
	return nil
}

func validateCopy(field string, c apiv1.CopyStep) error {
	if err := validateAbsPath(field+".dst", c.Dst); err != nil {
		return err
	}
	if c.Layer == "" {
		return errdefs.Invalid(field+".layer", "required: upload the copied files with POST /v1/images/layers (the CLI does) and name the digest")
	}
	if _, err := store.ParseDigest(c.Layer); err != nil {
		return errdefs.Invalid(field+".layer", "%v", err)
	}
	if len(c.Src) > 4096 || hasControl(c.Src) {
		return errdefs.Invalid(field+".src", "too long or holds control characters")
	}
	return nil
}

func validateEnv(field string, env map[string]string) error {
	if len(env) == 0 || len(env) > maxEnv {
		return errdefs.Invalid(field, "set 1 to %d variables", maxEnv)
	}
	for k, v := range env {
		if !envKeyRE.MatchString(k) || len(k) > 256 {
			return errdefs.Invalid(field, "%q is not a variable name", truncate(k))
		}
		if len(v) > 32<<10 || strings.ContainsRune(v, 0) {
			return errdefs.Invalid(field+"."+k, "value too long or holds a NUL byte")
		}
	}
	return nil
}

func validateAbsPath(field, p string) error {
	if !strings.HasPrefix(p, "/") || len(p) > 4096 || hasControl(p) {
		return errdefs.Invalid(field, "want an absolute path, got %q", truncate(p))
	}
	return nil
}

func validateUser(field, u string) error {
	if !sandbox.ValidUser(u) {
		return errdefs.Invalid(field, "%q is not a user (name, uid, or either with :group)", truncate(u))
	}
	return nil
}

func validateURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(raw) > 2048 || hasControl(raw) {
		return errdefs.Invalid(field, "want an http(s) URL, got %q", truncate(raw))
	}
	return nil
}

func validateImageConfig(spec apiv1.BuildSpec) error {
	if err := sandbox.ValidateArgv("cmd", spec.Cmd, true); err != nil {
		return err
	}
	if len(spec.Env) > 0 {
		if err := validateEnv("env", spec.Env); err != nil {
			return err
		}
	}
	if spec.Workdir != "" {
		if err := validateAbsPath("workdir", spec.Workdir); err != nil {
			return err
		}
	}
	if spec.User != "" {
		return validateUser("user", spec.User)
	}
	return nil
}

// describe is the step's one-line name in progress output.
func describe(k stepKind, d apiv1.BuildStep) string {
	var s string
	switch k {
	case kindApt:
		s = strings.Join(d.AptInstall, " ")
	case kindPip:
		s = strings.Join(d.PipInstall.Packages, " ")
	case kindNpm:
		s = strings.Join(d.NpmInstall.Packages, " ")
	case kindRun:
		s = strings.Join(d.Run, "; ")
	case kindCopy:
		s = d.Copy.Src + " -> " + path.Clean(d.Copy.Dst)
	case kindEnv:
		s = strings.Join(slices.Sorted(maps.Keys(d.Env)), " ")
	case kindWorkdir:
		s = d.Workdir
	case kindUser:
		s = d.User
	}
	return truncateTo(string(k)+" "+strings.Join(strings.Fields(s), " "), maxNameLen)
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func truncate(s string) string { return truncateTo(s, 64) }

func truncateTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
