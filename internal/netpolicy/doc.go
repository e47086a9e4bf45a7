// Package netpolicy is the kernel side of Corral's sandbox networking: for
// each sandbox it owns a network namespace (bind-mounted under the state
// directory), a veth pair, a /30 from the address pool, the routes inside
// the namespace, and the nftables rules that steer and filter the
// sandbox's traffic on the host. It also owns the shared nftables table
// (one inet table, by default "corral") and the host's IPv4 forwarding
// switch.
//
// # Topology
//
// A sandbox with slot index i gets the i-th /30 of the pool: .1 is the
// gateway on the host side of the veth (named LinkPrefix + hex index),
// .2 is the sandbox's address on "eth0" inside the namespace, whose
// default route points at the gateway. IPv6 is disabled inside the
// namespace and on the host link, and any IPv6 a sandbox sends is dropped:
// sandboxes have no IPv6 egress. gVisor uses the namespace with
// `runsc --network=sandbox` and the OCI network namespace path set to
// Slot.NetnsPath; a VM runtime can later add a tap device inside the same
// namespace and bridge or redirect it to eth0 without changing the host
// side.
//
// # Rules
//
// The table has four base chains, each of which only ever matches packets
// whose input or output interface carries LinkPrefix; host traffic is
// never touched and no base chain has a drop policy:
//
//   - prerouting (nat): iifname vmap -> the sandbox's nat chain. It DNATs
//     every UDP/TCP port 53 packet to <gateway>:DNSPort (the daemon's
//     resolver, which identifies the sandbox by source address with
//     Lookup) and every new TCP connection whose destination passes the
//     address part of the policy to <gateway>:ProxyPort (the daemon's
//     transparent proxy, which reads the original destination with
//     SO_ORIGINAL_DST). Destinations that fail the address policy are not
//     steered, so the filter chains refuse them.
//   - postrouting (nat): masquerade of the pool out of any non-Corral link.
//   - input (filter): from a sandbox link, only the resolver and proxy
//     ports on that sandbox's own gateway; everything else is refused,
//     which keeps sandboxes off the host's services, the daemon's API and
//     the host's other addresses.
//   - forward (filter): from a sandbox link, the policy: established
//     flows, then block, other sandboxes, always-denied ranges
//     (policy.AlwaysDenied minus Config.OperatorAllowed), the host's
//     networks (below), the CIDR allowlist, or in domain mode the
//     sandbox's set of addresses its resolver answered with
//     (AllowResolved, elements with a timeout), and finally TCP, UDP and
//     ICMP echo (only TCP in domain mode). Nothing new is forwarded into a
//     sandbox.
//
// # The host's networks
//
// Every IPv4 address on the host's interfaces and the prefix it is on
// (192.0.2.2/24: the whole 192.0.2.0/24, the host's LAN with its router
// and neighbours) are denied whatever their range, reason
// DeniedHostNetwork: the "hostnet" set in the forward and nat chains, and
// HostNetwork for the resolver's filter of answers and the egress proxy.
// Corral's own links and the pool are left out (other sandboxes have
// their own rule); Config.OperatorAllowed re-opens a network as it
// re-opens an always-denied range, while the host's own addresses stay
// refused by the input chain. A netlink subscription to address changes
// keeps the set current (one transaction per change, flows to a newly
// denied network cut), with a periodic resync behind it (hostnet.go).
//
// Each change is one nftables transaction: SetPolicy replaces the
// sandbox's three chains atomically and then removes the conntrack entries
// of flows the new policy no longer allows.
//
// # Decisions and denials
//
// A denied packet is refused, not dropped, so the sandbox's attempt fails
// at once instead of waiting for its timeout: TCP with a reset, anything
// else with ICMP admin-prohibited (EHOSTUNREACH on a connected UDP
// socket). Only IPv6 and packets whose source is not the sandbox's are
// dropped without an answer: no answer goes to a spoofed address (a
// spoofed packet is still logged, within the slot's log limit, and reported
// as a decision with reason "spoofed source A"). Every refusal and
// drop feeds a named counter per sandbox and reason (the Denied*
// constants); Denials and DenialCounts read them (packets, not
// connections).
//
// With Config.Decide set, each refusing rule is preceded by one that logs
// the first packet of a flow (ct state new or untracked) to the NFLOG
// group Config.LogGroup, with the prefix "sb<slot>_<reason>" and the first
// 64 bytes of the packet, within a per-sandbox limit object (LogRate a
// second, burst LogBurst) shared by the sandbox's input and forward
// chains: a flood is still refused and counted, but cannot flood the
// daemon or the event log. New binds the group (one reader per host and
// group: a second daemon needs another LogGroup) and a goroutine reads it
// until Close, maps each message back to its sandbox (the prefix's slot
// and the packet's source, which the spoofing rule vouches for) and calls
// Decide with a policy.Decision: Allowed false (but see below), Via "nftables", Proto
// "tcp", "udp" or "icmp", the destination address and, for TCP and UDP,
// port, and the reason constant as Reason. Messages the kernel could not
// deliver (Decide too slow, the socket full) are counted from its
// sequence numbers (LostDecisions) and logged. New leaves the host's
// default logger binding alone (no NFULNL_CFG_CMD_PF_BIND, which would
// replace nf_log_ipv4 for every other user): nftables' "log group"
// reaches nfnetlink_log without it. A kernel without nfnetlink_log makes
// New fail with ErrNotSupported; without Decide no log rule is installed
// and nfnetlink_log is not needed.
//
// Allowed new flows the forward chain accepts (UDP and ICMP echo, and TCP
// when there is no proxy) are logged the same way with the prefix
// "sb<slot>_allowed" and become decisions with Allowed true. DNS goes to
// the resolver and proxied TCP to the egress proxy, which record their
// own decisions (Via "dns" and "proxy"), allowed or denied, with the name
// when known. Together they put every egress attempt of a sandbox in its
// event log, within the rate limit.
//
// # State and restarts
//
// A small JSON file per sandbox under <StateDir>/slots records the lease,
// the link, the namespace path and the policy. It is written before any
// kernel object is created, so Detach can always clean up from the id
// alone, even after a crash mid-Attach. New rebuilds the table from these
// files in one transaction (keeping counters and resolved addresses),
// removes Corral links and namespace mounts that have no file, and leaves
// every recorded sandbox working: a daemon restart does not cut running
// sandboxes off.
//
// # Wiring (daemon)
//
// New at start, before the resolver and proxy listen; List and Detach for
// every id the daemon no longer knows; Config.Decide set to the
// manager's decision recorder (it must not block) and Config.LogGroup left
// at DefaultLogGroup unless another process reads that group. Per sandbox:
// Attach before `runsc create` (gVisor copies eth0's address and routes
// at start), the OCI spec's linux.namespaces network entry with path
// Slot.NetnsPath, runsc with --network=sandbox, and a resolv.conf naming
// Slot.Gateway; Detach after `runsc delete`. The resolver and proxy map a source address to a
// sandbox with Lookup; in domain mode the resolver calls AllowResolved with
// each answer before replying.
//
// This package imports only Corral's contracts (netpolicy/policy,
// errdefs, cleanup). It must not import the sandbox manager, the API, the
// runtime backends, or the resolver and proxy packages: they call it.
package netpolicy
