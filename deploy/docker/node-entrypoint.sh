#!/bin/sh
# The node image's entrypoint: prepares the container's cgroup, then runs
# corral with the container's args.
#
# On a cgroup v2 host the container has its own cgroup namespace, whose
# root is the container's cgroup, and the daemon's own processes are in
# it. The kernel enables controllers for a cgroup's children only while no
# process sits in the cgroup itself, so runsc could give no sandbox a
# memory or CPU limit. Move this container's processes into a child group
# ("daemon") and enable every available controller for the children; the
# sandboxes' groups (/corral/...) are then the daemon's siblings. Only at
# the root of a private cgroup namespace ("0::/"): never on the host's.
set -eu
cg=/sys/fs/cgroup
if [ -f "$cg/cgroup.controllers" ] && grep -qx "0::/" /proc/self/cgroup; then
	mkdir -p "$cg/daemon"
	for pid in $(cat "$cg/cgroup.procs"); do
		echo "$pid" >"$cg/daemon/cgroup.procs" 2>/dev/null || true
	done
	for c in $(cat "$cg/cgroup.controllers"); do
		echo "+$c" >"$cg/cgroup.subtree_control" 2>/dev/null || echo "node-entrypoint: controller $c not enabled for sandboxes" >&2
	done
fi
exec "${CORRAL_BIN:-/usr/local/bin/corral}" "$@"
