package agent

import (
	"bytes"
	"io"
	"os"
	"strings"

	"corral/internal/agentapi"
	"corral/internal/fspath"
)

// maxHostsBytes bounds the image's /etc/hosts the agent reads to keep its
// entries.
const maxHostsBytes = 1 << 20

// hostsMark ends the line of /etc/hosts the agent owns.
const hostsMark = "# corral: this sandbox"

// writeHostFiles makes /etc/hostname say the kernel's hostname (the
// sandbox id, as `hostname` prints it) and /etc/hosts map it, and
// localhost if the image's file does not: the image's other entries stay.
func writeHostFiles(root, name string) error {
	if err := writeEtcFile(root, agentapi.Hostname, agentapi.HostnameTemp, name+"\n"); err != nil {
		return err
	}
	return writeEtcFile(root, agentapi.Hosts, agentapi.HostsTemp, hostsContent(readHosts(root), name))
}

// readHosts returns the sandbox's /etc/hosts, or nothing when it is
// missing, unreadable or too large to be one.
func readHosts(root string) []byte {
	p, err := fspath.ResolveNoFollow(root, agentapi.Hosts)
	if err != nil {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxHostsBytes+1))
	if err != nil || len(b) > maxHostsBytes {
		return nil
	}
	return b
}

// hostsContent is old without the agent's previous line, with localhost
// entries when old has none, and a line mapping name to 127.0.1.1 (the
// Debian convention for a machine's own name; a sandbox's network
// address can change under it, a copy of a memory snapshot gets a new
// one).
func hostsContent(old []byte, name string) string {
	var b strings.Builder
	hasLocal := false
	old = bytes.TrimSuffix(old, []byte("\n"))
	for _, line := range bytes.Split(old, []byte("\n")) {
		s := string(line)
		if strings.HasSuffix(s, hostsMark) || len(old) == 0 {
			continue
		}
		f := strings.Fields(s)
		if len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
			for _, n := range f[1:] {
				hasLocal = hasLocal || n == "localhost"
			}
		}
		b.WriteString(s + "\n")
	}
	head := ""
	if !hasLocal {
		head = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	}
	return head + b.String() + "127.0.1.1\t" + name + "\t" + hostsMark + "\n"
}
