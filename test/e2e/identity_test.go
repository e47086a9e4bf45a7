package e2e

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
)

// What a new user meets first, on both runtimes: the base image has pip,
// venv (and kmod, whose modprobe works in a vm); the sandbox's name is
// the same in hostname, /etc/hostname and /etc/hosts, localhost resolves;
// and inspect shows the address and gateway the sandbox really has.
func TestBaseImageAndIdentity(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	for _, rt := range runtimes {
		t.Run(rt, func(t *testing.T) {
			id := d.create("--runtime", rt)
			out, errs, code := d.cli("", "exec", id, "--", "sh", "-c",
				`python3 -m pip --version >/dev/null && python3 -m venv /tmp/v && /tmp/v/bin/pip --version >/dev/null && echo ok`)
			if code != 0 || out != "ok\n" {
				t.Errorf("pip and venv: exit %d, %q %q", code, out, errs)
			}
			if rt == "vm" {
				if out, errs, code := d.cli("", "exec", id, "--", "sh", "-c", "modprobe isofs && grep -c '^isofs ' /proc/modules"); code != 0 || out != "1\n" {
					t.Errorf("modprobe in the vm: exit %d, %q %q", code, out, errs)
				}
			}
			names := d.mustCLI("exec", id, "--", "sh", "-c", `hostname; cat /etc/hostname; getent hosts "$(hostname)" | awk '{print $2}'`)
			if want := id + "\n" + id + "\n" + id + "\n"; names != want {
				t.Errorf("hostname, /etc/hostname, /etc/hosts: %q, want %q", names, want)
			}
			py := `import socket; print(socket.getaddrinfo("localhost", 80)[0][4][0])`
			if out, errs, code := d.cli("", "exec", id, "--", "python3", "-c", py); code != 0 || (out != "127.0.0.1\n" && out != "::1\n") {
				t.Errorf("localhost does not resolve: exit %d, %q %q", code, out, errs)
			}
			var sb struct{ Address, Gateway string }
			if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &sb); err != nil {
				t.Fatal(err)
			}
			if _, err := netip.ParseAddr(sb.Address); err != nil {
				t.Fatalf("inspect address %q: %v", sb.Address, err)
			}
			if _, err := netip.ParseAddr(sb.Gateway); err != nil {
				t.Fatalf("inspect gateway %q: %v", sb.Gateway, err)
			}
			// The address the sandbox routes to its gateway from (a UDP
			// connect sends nothing).
			py = `import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("` + sb.Gateway + `", 53)); print(s.getsockname()[0])`
			if out := strings.TrimSpace(d.mustCLI("exec", id, "--", "python3", "-c", py)); out != sb.Address {
				t.Errorf("the sandbox's own address is %q; inspect says %q", out, sb.Address)
			}
			// A block_network sandbox keeps its link (a policy change can
			// open it), so it has an address; an ended one has none.
			d.mustCLI("rm", id)
			var ended struct{ Address, Gateway string }
			if err := json.Unmarshal([]byte(d.mustCLI("inspect", id)), &ended); err != nil || ended.Address != "" || ended.Gateway != "" {
				t.Errorf("an ended sandbox shows address %q gateway %q (%v)", ended.Address, ended.Gateway, err)
			}
		})
	}
}
