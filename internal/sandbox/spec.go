package sandbox

import (
	"regexp"
	"strings"
	"time"

	"corral/internal/errdefs"
	"corral/internal/ids"
	"corral/internal/netpolicy/policy"
	"corral/internal/secrets"
)

// Limits and defaults of a spec.
const (
	DefaultTimeout    = 5 * time.Minute
	MaxTimeout        = 24 * time.Hour
	DefaultCPU        = 1.0
	MaxCPU            = 64.0
	DefaultMemoryMB   = 512
	MaxMemoryMB       = 256 * 1024
	DefaultPidsLimit  = 4096
	DefaultDiskMB     = 10 * 1024
	MinDiskMB         = 64
	MaxDiskMB         = 1024 * 1024
	maxEnvEntries     = 256
	maxEnvBytes       = 128 << 10
	maxTags           = 64
	maxTagValue       = 256
	maxEntrypointArgs = 4096
)

// Runtimes is every runtime name the API accepts (one may still be
// unavailable on a host: the manager says so).
var Runtimes = []string{"gvisor", "vm"}

// Spec is what a sandbox is created from, defaults applied.
type Spec struct {
	Runtime       string        `json:"runtime"`
	Image         string        `json:"image"`
	ImageDigest   string        `json:"image_digest,omitempty"` // resolved at create
	CPU           float64       `json:"cpu"`
	CPULimit      float64       `json:"cpu_limit"`
	MemoryMB      int64         `json:"memory_mb"`
	MemoryLimitMB int64         `json:"memory_limit_mb"`
	DiskMB        int64         `json:"disk_mb"`
	Timeout       time.Duration `json:"timeout"`
	IdleTimeout   time.Duration `json:"idle_timeout"`
	// AutoPause pauses the sandbox when IdleTimeout passes instead of
	// ending it; the next API call on it resumes it.
	AutoPause bool `json:"auto_pause,omitempty"`
	// PauseOnTimeout pauses the sandbox when its lifetime ends instead
	// of ending it (E2B's lifecycle.onTimeout "pause"); resuming it gives
	// it a fresh Timeout.
	PauseOnTimeout bool `json:"pause_on_timeout,omitempty"`
	// PauseFilesystem makes the pauses the daemon takes by itself
	// (pause_on_timeout) filesystem-only (PauseFilesystem): no memory is
	// kept, and only an explicit resume boots the sandbox again (E2B's
	// lifecycle.onTimeout keepMemory: false).
	PauseFilesystem bool `json:"pause_filesystem,omitempty"`
	// AutoResume lets the next call on a paused sandbox resume it (as
	// AutoPause always does); without it only an explicit resume does.
	AutoResume bool              `json:"auto_resume,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Workdir    string            `json:"workdir,omitempty"`
	User       string            `json:"user,omitempty"` // default user of processes; the image's by default
	Name       string            `json:"name,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Network    policy.Policy     `json:"network"`
	Expose     []ExposedPort     `json:"expose,omitempty"`
	// FromSnapshot names the memory snapshot (id or name) the sandbox
	// starts from as a copy; its image, runtime and resources are the
	// snapshot's.
	FromSnapshot string `json:"from_snapshot,omitempty"`
	// CACerts are PEM CA certificates the sandbox trusts beyond its
	// image's (added to its trust store at start; ValidateCACerts).
	CACerts []string `json:"ca_certs,omitempty"`
	// Volumes are named volumes mounted into the sandbox (volumes.go).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Secrets names the stored secrets whose values every process gets as
	// environment variables (after Env). The record keeps the names only;
	// the values, read at create, are SecretEnv.
	Secrets []string `json:"secrets,omitempty"`
	// SecretEnv holds the values of Secrets: never encoded with the spec
	// (the records store seals it with Env), never in the API.
	SecretEnv map[string]string `json:"-"`
	// SecretHeaders are the egress proxy's header rules: values injected
	// into the sandbox's requests to named hosts, never into the sandbox.
	SecretHeaders []secrets.HeaderRule `json:"secret_headers,omitempty"`
}

// ExposedPort is a port inside the sandbox reachable through the daemon.
type ExposedPort struct {
	Port   int  `json:"port"`
	Public bool `json:"public,omitempty"` // no token needed
}

// maxExposed bounds the exposed ports of one sandbox.
const maxExposed = 32

var (
	nameRE   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tagKeyRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_./-]{0,62}$`)
	userRE   = regexp.MustCompile(`^([a-z_][a-z0-9_-]{0,31}\$?|[0-9]{1,10})(:([a-z_][a-z0-9_-]{0,31}|[0-9]{1,10}))?$`)
)

// ValidName reports whether n can name a sandbox: a name is unique among
// live sandboxes and accepted wherever an id is, so it must not look like
// one.
func ValidName(n string) bool { return nameRE.MatchString(n) && !ids.Sandbox(n) }

// ValidUser reports whether u names a user the way processes take one: a
// login name or a uid, optionally followed by ":" and a group name or gid.
func ValidUser(u string) bool { return userRE.MatchString(u) }

// Normalize applies defaults and validates every field. Errors are
// ErrInvalidArgument (or ErrNotSupported) naming the field.
func (s *Spec) Normalize() error {
	if s.Runtime == "" {
		s.Runtime = "gvisor"
	}
	if !knownRuntime(s.Runtime) {
		return errdefs.Invalid("runtime", "unknown runtime %q (want one of %s)", s.Runtime, strings.Join(Runtimes, ", "))
	}
	if s.Image == "" {
		s.Image = "base"
	}
	if err := s.normalizeResources(); err != nil {
		return err
	}
	if err := s.normalizeTimes(); err != nil {
		return err
	}
	if err := s.Network.Normalize(); err != nil {
		return err
	}
	if err := s.validateExpose(); err != nil {
		return err
	}
	if err := s.validateVolumes(); err != nil {
		return err
	}
	return s.validateStrings()
}

func knownRuntime(r string) bool {
	for _, k := range Runtimes {
		if k == r {
			return true
		}
	}
	return false
}

func (s *Spec) normalizeResources() error {
	if s.CPU < 0 || s.CPU > MaxCPU || s.CPU != s.CPU {
		return errdefs.Invalid("cpu", "must be between 0 and %g cores, got %g", MaxCPU, s.CPU)
	}
	if s.CPULimit < 0 || s.CPULimit > MaxCPU || s.CPULimit != s.CPULimit {
		return errdefs.Invalid("cpu_limit", "must be between 0 and %g cores, got %g", MaxCPU, s.CPULimit)
	}
	// The CPU limit defaults to the request, so a default sandbox cannot
	// take more than its core from its neighbours; a limit given alone
	// below the default request lowers the request with it, as memory does.
	if s.CPU == 0 {
		s.CPU = DefaultCPU
		if s.CPULimit != 0 && s.CPULimit < s.CPU {
			s.CPU = s.CPULimit
		}
	}
	if s.CPULimit == 0 {
		s.CPULimit = s.CPU
	}
	if s.CPULimit < s.CPU {
		return errdefs.Invalid("cpu_limit", "%g is below the cpu request %g", s.CPULimit, s.CPU)
	}
	if s.MemoryMB < 0 || s.MemoryMB > MaxMemoryMB {
		return errdefs.Invalid("memory_mb", "must be between 0 and %d MiB, got %d", MaxMemoryMB, s.MemoryMB)
	}
	if s.MemoryLimitMB < 0 || s.MemoryLimitMB > MaxMemoryMB {
		return errdefs.Invalid("memory_limit_mb", "must be between 0 and %d MiB, got %d", MaxMemoryMB, s.MemoryLimitMB)
	}
	if s.MemoryMB == 0 {
		s.MemoryMB = DefaultMemoryMB
		if s.MemoryLimitMB != 0 && s.MemoryLimitMB < s.MemoryMB {
			s.MemoryMB = s.MemoryLimitMB
		}
	}
	if s.MemoryLimitMB == 0 {
		s.MemoryLimitMB = s.MemoryMB
	}
	if s.MemoryLimitMB < s.MemoryMB {
		return errdefs.Invalid("memory_limit_mb", "%d is below the memory request %d", s.MemoryLimitMB, s.MemoryMB)
	}
	if s.MemoryLimitMB < 32 {
		return errdefs.Invalid("memory_limit_mb", "must be at least 32 MiB, got %d", s.MemoryLimitMB)
	}
	if s.DiskMB == 0 {
		s.DiskMB = DefaultDiskMB
	}
	if s.DiskMB < MinDiskMB || s.DiskMB > MaxDiskMB {
		return errdefs.Invalid("disk_mb", "must be between %d and %d MiB, got %d", MinDiskMB, MaxDiskMB, s.DiskMB)
	}
	return nil
}

func (s *Spec) normalizeTimes() error {
	if s.Timeout < 0 || s.Timeout > MaxTimeout {
		return errdefs.Invalid("timeout", "must be between 0 and %s, got %s", MaxTimeout, s.Timeout)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.IdleTimeout < 0 || s.IdleTimeout > MaxTimeout {
		return errdefs.Invalid("idle_timeout", "must be between 0 and %s, got %s", MaxTimeout, s.IdleTimeout)
	}
	if s.AutoPause && s.IdleTimeout == 0 {
		return errdefs.Invalid("auto_pause", "needs an idle_timeout (the idle time after which to pause)")
	}
	if s.AutoResume && !s.AutoPause && !s.PauseOnTimeout {
		return errdefs.Invalid("auto_resume", "needs auto_pause or pause_on_timeout (nothing pauses the sandbox by itself otherwise)")
	}
	switch {
	case s.PauseFilesystem && !s.PauseOnTimeout:
		return errdefs.Invalid("pause_filesystem", "needs pause_on_timeout (the pause it makes filesystem-only)")
	case s.PauseFilesystem && (s.AutoResume || s.AutoPause):
		return errdefs.Invalid("pause_filesystem", "cannot go with auto_resume or auto_pause: a filesystem-only pause keeps no processes, so only an explicit resume boots the sandbox again")
	}
	return nil
}

func (s *Spec) validateStrings() error {
	if len(s.Image) > 512 || strings.ContainsAny(s.Image, "\x00 \t\n") {
		return errdefs.Invalid("image", "%q is not an image reference", s.Image)
	}
	if s.Name != "" && !ValidName(s.Name) {
		return errdefs.Invalid("name", "%q must match %s and not be shaped like a sandbox id", s.Name, nameRE)
	}
	if s.FromSnapshot != "" && !ValidSnapshotRef(s.FromSnapshot) {
		return errdefs.Invalid("from_snapshot", "%q is neither a snapshot id nor a snapshot name", s.FromSnapshot)
	}
	if err := validateEnv("env", s.Env); err != nil {
		return err
	}
	if err := ValidateTags(s.Tags); err != nil {
		return err
	}
	if err := ValidateCACerts("ca_certs", s.CACerts); err != nil {
		return err
	}
	if err := secrets.ValidateNames("secrets", s.Secrets); err != nil {
		return err
	}
	if err := secrets.NormalizeRules("secret_headers", s.SecretHeaders); err != nil {
		return err
	}
	if s.Workdir != "" && (!strings.HasPrefix(s.Workdir, "/") || len(s.Workdir) > 4096 || strings.ContainsRune(s.Workdir, 0)) {
		return errdefs.Invalid("workdir", "must be an absolute path, got %q", s.Workdir)
	}
	if s.User != "" && !ValidUser(s.User) {
		return errdefs.Invalid("user", "%q is not a user (name, uid, or either with :group)", s.User)
	}
	if len(s.Entrypoint) > maxEntrypointArgs {
		return errdefs.Invalid("entrypoint", "at most %d arguments", maxEntrypointArgs)
	}
	return ValidateArgv("entrypoint", s.Entrypoint, true)
}

// ValidateArgv checks a command line: non-empty first word when required,
// no NUL bytes anywhere.
func ValidateArgv(field string, argv []string, optional bool) error {
	if len(argv) == 0 {
		if optional {
			return nil
		}
		return errdefs.Invalid(field, "a command is required")
	}
	if argv[0] == "" {
		return errdefs.Invalid(field, "the command name is empty")
	}
	total := 0
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return errdefs.Invalid(field, "arguments must not contain NUL bytes")
		}
		total += len(a)
	}
	if total > 1<<20 {
		return errdefs.Invalid(field, "arguments exceed 1 MiB")
	}
	return nil
}

// validateEnv checks environment variables named by field.
func validateEnv(field string, env map[string]string) error {
	if len(env) > maxEnvEntries {
		return errdefs.Invalid(field, "at most %d variables, got %d", maxEnvEntries, len(env))
	}
	total := 0
	for k, v := range env {
		if !envKeyRE.MatchString(k) {
			return errdefs.Invalid(field, "bad variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return errdefs.Invalid(field, "value of %s contains a NUL byte", k)
		}
		total += len(k) + len(v)
	}
	if total > maxEnvBytes {
		return errdefs.Invalid(field, "variables exceed %d bytes", maxEnvBytes)
	}
	return nil
}

// ValidateEnv is validateEnv for other packages (exec requests).
func ValidateEnv(field string, env map[string]string) error { return validateEnv(field, env) }

func (s *Spec) validateExpose() error {
	if len(s.Expose) > maxExposed {
		return errdefs.Invalid("expose", "at most %d ports, got %d", maxExposed, len(s.Expose))
	}
	seen := map[int]bool{}
	for _, p := range s.Expose {
		if p.Port < 1 || p.Port > 65535 {
			return errdefs.Invalid("expose", "%d is not a TCP port", p.Port)
		}
		if seen[p.Port] {
			return errdefs.Invalid("expose", "port %d listed twice", p.Port)
		}
		seen[p.Port] = true
	}
	return nil
}

// Exposed returns the exposed port p, if it is.
func (s *Spec) Exposed(p int) (ExposedPort, bool) {
	for _, e := range s.Expose {
		if e.Port == p {
			return e, true
		}
	}
	return ExposedPort{}, false
}

// ResumesOnCall reports whether the next call on the insides of a paused
// sandbox of this spec resumes it (auto_pause, auto_resume).
func (s Spec) ResumesOnCall() bool { return s.AutoPause || s.AutoResume }
