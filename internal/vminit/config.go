package vminit

// Names shared with the host side.
const (
	// ConfigPath is config.json's path on the scratch disk.
	ConfigPath = "corral/config.json"
	// UpperDir and WorkDir are the overlay's directories on the scratch
	// disk.
	UpperDir = "upper"
	WorkDir  = "work"
	// Disk serial numbers (virtio-blk serial=...).
	SerialRoot    = "corral-root"
	SerialScratch = "corral-scratch"
	SerialModules = "corral-modules"
	// AgentPort is the virtio-serial port the agent listens on.
	AgentPort = "corral.agent"
	// ModulesList is the initramfs file listing the modules to load, one
	// path per line, dependencies first.
	ModulesList = "/modules.list"
	// NativeDirs are directories of the guest that get a directory of the
	// scratch disk (ext4) bind-mounted instead of living on the root
	// overlay, whose upper layer cannot be another overlay's: Docker's and
	// containerd's storage. What they hold is not part of an export.
	NativeDirs = "/var/lib/docker:/var/lib/containerd"
	// ScratchInRoot is where the scratch disk is in the guest's root (on
	// the /.corral tmpfs, so never part of an export).
	ScratchInRoot = "/.corral/scratch"
	// ReadyLine is printed on the console just before the agent starts.
	ReadyLine = "corral-vminit: starting the agent"
)

// Config is what the guest needs from the host.
type Config struct {
	Hostname string `json:"hostname"`
	// Env is the agent's environment (it passes it on to processes).
	Env []string `json:"env,omitempty"`
	// Nameservers are written to /etc/resolv.conf by the agent.
	Nameservers []string `json:"nameservers,omitempty"`
	// Network is absent for a sandbox without a network.
	Network *Network `json:"network,omitempty"`
	// KernelRelease names /lib/modules/<release>.
	KernelRelease string `json:"kernel_release"`
	// Modules are loaded from the modules disk before the agent starts
	// (paths relative to /lib/modules/<release>, dependencies first): the
	// devices a sandbox expects without modprobe in its image (loop, fuse).
	Modules []string `json:"modules,omitempty"`
}

// Network is the guest's one interface.
type Network struct {
	MAC     string `json:"mac"`
	Address string `json:"address"` // CIDR, e.g. 10.88.0.2/30
	Gateway string `json:"gateway"`
}
