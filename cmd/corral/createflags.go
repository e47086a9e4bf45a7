package main

import (
	"fmt"
	"strings"
	"time"

	"corral/pkg/apiv1"

	"github.com/spf13/pflag"
)

// createFlags are the flags shared by create and run.
type createFlags struct {
	runtime, image, name, workdir, user, entrypoint string
	fromSnapshot                                    string
	cpu, cpuLimit                                   float64
	memory, memoryLimit                             int64
	disk                                            float64
	timeout, idleTimeout                            time.Duration
	autoPause, pauseOnTimeout, autoResume           bool
	pauseFilesystem                                 bool
	env, tags                                       []string
	net                                             netFlags
	expose, exposePublic                            []int
	caCerts                                         []string
	volumes                                         []string
	secrets, secretHeaders                          []string
}

// netFlags are the network policy flags of create, run and net set.
type netFlags struct {
	block          bool
	cidrs, domains []string
}

func (n *netFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&n.block, "block-network", false, "no network at all")
	fs.StringSliceVar(&n.cidrs, "cidr-allow", nil, "allow egress only to these ranges (repeatable, comma-separated)")
	fs.StringSliceVar(&n.domains, "domain-allow", nil, "allow egress only to these names, e.g. pypi.org,*.github.com")
}

func (n *netFlags) policy() apiv1.NetworkPolicy {
	return apiv1.NetworkPolicy{BlockNetwork: n.block, CIDRAllowlist: n.cidrs, DomainAllowlist: n.domains}
}

func (f *createFlags) register(fs *pflag.FlagSet, withEntrypoint bool) {
	fs.StringVar(&f.runtime, "runtime", "", "runtime: gvisor (default) or vm")
	fs.StringVar(&f.image, "image", "", "image to start from: name:tag or sha256:... (default: the Debian base)")
	fs.StringVar(&f.name, "name", "", "a name for the sandbox")
	fs.StringVar(&f.fromSnapshot, "from-snapshot", "", "start as a copy of this memory snapshot (id or name; see snapshot mem)")
	fs.StringVar(&f.workdir, "workdir", "", "default working directory of processes")
	fs.StringVar(&f.user, "user", "", "default user of processes (name, uid, or either with :group; default: the image's, else root)")
	fs.Float64Var(&f.cpu, "cpu", 0, "CPU request in cores (default 1)")
	fs.Float64Var(&f.cpuLimit, "cpu-limit", 0, "CPU ceiling in cores (default: the request; alone below 1, it lowers the request too)")
	fs.Int64Var(&f.memory, "memory", 0, "memory request in MiB (default 512)")
	fs.Int64Var(&f.memoryLimit, "memory-limit", 0, "memory limit in MiB (default: the request)")
	fs.Float64Var(&f.disk, "disk", 0, "size of the sandbox's writable layer in GiB (default 10)")
	fs.DurationVar(&f.timeout, "timeout", 0, "maximum lifetime (default 5m, at most 24h)")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", 0, "terminate after this long without activity")
	fs.BoolVar(&f.autoPause, "auto-pause", false, "pause instead of terminating after --idle-timeout; the next command on the sandbox resumes it")
	fs.BoolVar(&f.pauseOnTimeout, "pause-on-timeout", false, "pause instead of terminating when --timeout ends; a resume gives it a fresh timeout")
	fs.BoolVar(&f.pauseFilesystem, "pause-filesystem", false, "with --pause-on-timeout: pause keeping only the filesystem (resume boots the sandbox afresh)")
	fs.BoolVar(&f.autoResume, "auto-resume", false, "with --pause-on-timeout: the next command on the paused sandbox resumes it")
	fs.StringArrayVarP(&f.env, "env", "e", nil, "environment variable K=V (repeatable)")
	fs.StringArrayVar(&f.tags, "tag", nil, "tag k=v (repeatable)")
	f.net.register(fs)
	fs.IntSliceVar(&f.expose, "expose", nil, "expose a port through the daemon, token-protected (repeatable)")
	fs.IntSliceVar(&f.exposePublic, "expose-public", nil, "expose a port through the daemon without a token")
	fs.StringArrayVarP(&f.volumes, "volume", "v", nil, "mount a named volume: NAME:/path or NAME:/path:ro (repeatable; see corral volume)")
	fs.StringArrayVar(&f.caCerts, "ca-cert", nil, "a PEM file of CA certificates the sandbox trusts beyond its image's (repeatable)")
	registerSecretFlags(fs, &f.secrets, &f.secretHeaders)
	if withEntrypoint {
		fs.StringVar(&f.entrypoint, "entrypoint", "", "command (run by sh -c) whose exit ends the sandbox")
	}
}

func (f *createFlags) request() (apiv1.CreateSandboxRequest, error) {
	env, err := pairs("--env", f.env)
	if err != nil {
		return apiv1.CreateSandboxRequest{}, err
	}
	tags, err := pairs("--tag", f.tags)
	if err != nil {
		return apiv1.CreateSandboxRequest{}, err
	}
	cas, err := readCACerts(f.caCerts)
	if err != nil {
		return apiv1.CreateSandboxRequest{}, err
	}
	req := apiv1.CreateSandboxRequest{
		Runtime: f.runtime, Image: f.image, Name: f.name, Workdir: f.workdir, User: f.user, CPU: f.cpu, CPULimit: f.cpuLimit,
		MemoryMB: f.memory, MemoryLimitMB: f.memoryLimit, DiskMB: int64(f.disk * 1024), Timeout: f.timeout.Seconds(),
		IdleTimeout: f.idleTimeout.Seconds(), Env: env, Tags: tags, NetworkPolicy: f.net.policy(),
		FromSnapshot: f.fromSnapshot, AutoPause: f.autoPause, PauseOnTimeout: f.pauseOnTimeout, AutoResume: f.autoResume,
		PauseFilesystem: f.pauseFilesystem,
		CACerts:         cas, Secrets: f.secrets,
	}
	if req.SecretHeaders, err = secretHeaders(f.secretHeaders); err != nil {
		return apiv1.CreateSandboxRequest{}, err
	}
	if req.Volumes, err = volumeFlags(f.volumes); err != nil {
		return apiv1.CreateSandboxRequest{}, err
	}
	if f.timeout < 0 {
		req.Timeout = -1 // let the daemon name the problem
	}
	for _, p := range f.expose {
		req.Expose = append(req.Expose, apiv1.ExposedPort{Port: p})
	}
	for _, p := range f.exposePublic {
		req.Expose = append(req.Expose, apiv1.ExposedPort{Port: p, Public: true})
	}
	if f.entrypoint != "" {
		req.Entrypoint = []string{"/bin/sh", "-c", f.entrypoint}
	}
	return req, nil
}

func pairs(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

// volumeFlags parses --volume NAME:/path[:ro|:rw]; the daemon checks the
// name and the path.
func volumeFlags(vals []string) ([]apiv1.VolumeMount, error) {
	var out []apiv1.VolumeMount
	for _, v := range vals {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("--volume %q: want NAME:/path or NAME:/path:ro", v)
		}
		m := apiv1.VolumeMount{Name: parts[0], Path: parts[1]}
		if len(parts) == 3 {
			switch parts[2] {
			case "ro":
				m.ReadOnly = true
			case "rw":
			default:
				return nil, fmt.Errorf("--volume %q: the mode is ro or rw, not %q", v, parts[2])
			}
		}
		out = append(out, m)
	}
	return out, nil
}
