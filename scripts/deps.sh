#!/usr/bin/env bash
# deps.sh installs what the Corral daemon needs on a fresh Debian 12 host, as
# root, idempotently:
#   - Debian packages: mmdebstrap, iproute2, nftables, ca-certificates, curl,
#     chromium (the console's browser tests) (and
#     the tools this script itself uses);
#   - runsc (gVisor) at a pinned version, built with CGO_ENABLED=0, into
#     $STATE/bin/runsc (rebuilt only when the pin changes);
#   - the base root filesystem $STATE/rootfs/debian-bookworm (rebuilt only
#     when its recipe changes);
#   - QEMU (Debian's qemu-system-x86) and the vm runtime's guest kernel: the
#     Debian cloud kernel unpacked into $STATE/vm/kernel/<release>, with
#     $STATE/vm/kernel/current pointing at it;
#   - host limits that bound how many sandboxes one daemon holds, raised
#     (never lowered) and kept in /etc/sysctl.d/60-corral.conf.
# Go must already be installed (/usr/local/go or on PATH).
#
# STATE is ${CORRAL_STATE_DIR:-/var/lib/corral}. CORRAL_DEBIAN_MIRROR
# overrides mmdebstrap's mirror. The script is quiet when there is nothing to
# do, says what it installs otherwise, and takes a lock so that concurrent
# runs do not race. It exports nothing.
set -euo pipefail

RUNSC_MODULE=gvisor.dev/gvisor/runsc
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237

ROOTFS_NAME=debian-bookworm
ROOTFS_SUITE=bookworm
ROOTFS_VARIANT=minbase
ROOTFS_INCLUDE=python3,python3-pip,python3-venv,ca-certificates,curl,git,procps,coreutils,kmod,sudo
# Mount points the gvisor runtime binds the agent and its socket directory
# onto (see internal/runtime/gvisor PrepareRootFS). Part of the recipe: a
# rootfs built before they were added is rebuilt.
ROOTFS_LAYOUT=corral-mountpoints-1

# postgresql: its server binaries (initdb, pg_ctl) for the cluster's tests,
# which run a throwaway instance of their own (internal/cluster/pgtest); the
# package's own service is never used, and a single machine needs none.
APT_PACKAGES=(mmdebstrap iproute2 nftables ca-certificates util-linux curl qemu-system-x86 kmod e2fsprogs chromium postgresql)

# The vm runtime's guest kernel: the Debian cloud kernel this metapackage
# depends on when it is first installed (the stamp keeps it until removed).
KERNEL_META=linux-image-cloud-amd64

# Host limits for density (docs/BENCHMARKS.md, Density). pid_max counts
# threads, and an idle gVisor sandbox is about 26 of them (sandbox, gofer,
# systrap stubs: 20,564 on the host with 800 held), so the kernel's default
# of 32768 stops runsc from starting one at about 1,200. Every sandbox that
# sends a packet holds a neighbour entry on its veth, and the default hard
# limit of the host's table (gc_thresh3) is 1024 entries.
SYSCTLS=(kernel.pid_max=4194304 net.ipv4.neigh.default.gc_thresh2=16384 net.ipv4.neigh.default.gc_thresh3=32768)
SYSCTL_CONF=/etc/sysctl.d/60-corral.conf

STATE=${CORRAL_STATE_DIR:-/var/lib/corral}

say() { echo "deps: $*" >&2; }
die() { say "error: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || die "must run as root"

mkdir -p "$STATE/bin" "$STATE/rootfs"
exec 9>"$STATE/.deps.lock"
if ! flock -n 9; then
	say "waiting for another deps.sh to finish"
	flock 9
fi

# install_packages installs the missing ones of APT_PACKAGES.
install_packages() {
	local missing=() p
	for p in "${APT_PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return
	say "installing Debian packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	local log
	log=$(mktemp)
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
		cat "$log" >&2
		rm -f "$log"
		die "apt-get failed"
	fi
	rm -f "$log"
}

# find_go sets GO to the go command or fails.
find_go() {
	if command -v go >/dev/null; then
		GO=$(command -v go)
	elif [[ -x /usr/local/go/bin/go ]]; then
		GO=/usr/local/go/bin/go
	else
		die "Go is not installed (looked on PATH and in /usr/local/go); install Go 1.26 first"
	fi
}

# install_runsc builds the pinned runsc unless the stamp says it is there.
install_runsc() {
	local bin=$STATE/bin/runsc stamp=$STATE/bin/runsc.stamp
	local want="$RUNSC_MODULE@$RUNSC_VERSION CGO_ENABLED=0"
	if [[ -x $bin && -f $stamp && $(<"$stamp") == "$want" ]]; then
		return
	fi
	find_go
	say "building runsc $RUNSC_VERSION (a few minutes)"
	local tmp
	tmp=$(mktemp -d "$STATE/bin/.runsc-build.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	# Outside any module, so the project's go.mod plays no part. A cgo build
	# fails at sandbox start (its umounter cannot re-exec /proc/self/exe).
	(cd "$tmp" && GOBIN=$tmp CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" install "$RUNSC_MODULE@$RUNSC_VERSION")
	"$GO" version -m "$tmp/runsc" | grep -q 'CGO_ENABLED=0' || die "runsc was not built with CGO_ENABLED=0"
	chmod 0755 "$tmp/runsc"
	mv -f "$tmp/runsc" "$bin"
	echo "$want" >"$tmp/stamp"
	mv -f "$tmp/stamp" "$stamp"
	rm -rf "$tmp"
	trap - EXIT
	say "installed $bin"
}

# install_rootfs builds the base root filesystem unless its stamp matches the
# recipe. It builds beside the final directory and renames it into place;
# the stamp is written last, so an interrupted run rebuilds.
install_rootfs() {
	local dir=$STATE/rootfs/$ROOTFS_NAME stamp=$STATE/rootfs/$ROOTFS_NAME.stamp
	local mirror=${CORRAL_DEBIAN_MIRROR:-}
	local want="suite=$ROOTFS_SUITE variant=$ROOTFS_VARIANT include=$ROOTFS_INCLUDE mirror=${mirror:-default} layout=$ROOTFS_LAYOUT"
	if [[ -d $dir && -f $stamp && $(<"$stamp") == "$want" ]]; then
		return
	fi
	say "building root filesystem $ROOTFS_NAME ($want; about a minute)"
	local tmp old
	tmp=$(mktemp -d "$STATE/rootfs/.$ROOTFS_NAME.build.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	local args=(--quiet --variant="$ROOTFS_VARIANT" --include="$ROOTFS_INCLUDE" "$ROOTFS_SUITE" "$tmp")
	[[ -n $mirror ]] && args+=("$mirror")
	mmdebstrap "${args[@]}"
	[[ -x $tmp/usr/bin/python3 ]] || die "built rootfs has no python3"
	# The shared rootfs is never written once in use: runsc's gofer would
	# otherwise create these mount points in it on first start.
	mkdir -p "$tmp/.corral/run"
	: >"$tmp/.corral/corral"
	chmod 0755 "$tmp/.corral" "$tmp/.corral/run" "$tmp/.corral/corral"
	chmod 0755 "$tmp"
	rm -f "$stamp"
	if [[ -e $dir ]]; then
		old=$(mktemp -d "$STATE/rootfs/.$ROOTFS_NAME.old.XXXXXX")
		mv "$dir" "$old/"
		mv "$tmp" "$dir"
		rm -rf "$old"
	else
		mv "$tmp" "$dir"
	fi
	trap - EXIT
	echo "$want" >"$stamp.tmp"
	mv -f "$stamp.tmp" "$stamp"
	say "installed $dir ($(du -sh "$dir" | cut -f1))"
}

# install_kernel unpacks the Debian cloud kernel and its modules into
# $STATE/vm/kernel/<release>/ (vmlinuz, lib/modules/<release> with a
# modules.dep from depmod, which the package does not ship) and points
# $STATE/vm/kernel/current at it. The stamp names the package; a missing or
# incomplete kernel is installed again.
install_kernel() {
	local base=$STATE/vm/kernel stamp=$STATE/vm/kernel/current.stamp
	if [[ -f $stamp && -e $base/current/vmlinuz && -f $base/current/lib/modules/$(<"$stamp.release")/modules.dep ]]; then
		return
	fi
	mkdir -p "$base"
	local pkg
	pkg=$(apt-cache depends "$KERNEL_META" 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
	if [[ -z $pkg ]]; then
		apt-get update -qq
		pkg=$(apt-cache depends "$KERNEL_META" | awk '/Depends: linux-image-/{print $2; exit}')
	fi
	[[ -n $pkg ]] || die "cannot resolve $KERNEL_META to a kernel package"
	say "installing guest kernel $pkg"
	local tmp
	tmp=$(mktemp -d "$base/.install.XXXXXX")
	# shellcheck disable=SC2064
	trap "rm -rf '$tmp'" EXIT
	(cd "$tmp" && apt-get download -qq "$pkg" 2>/dev/null) || { apt-get update -qq && (cd "$tmp" && apt-get download -qq "$pkg"); }
	dpkg -x "$tmp"/*.deb "$tmp/x"
	local release
	release=$(ls "$tmp/x/lib/modules")
	[[ -n $release && -f $tmp/x/boot/vmlinuz-$release ]] || die "$pkg holds no kernel"
	depmod -b "$tmp/x" "$release"
	local dir=$base/$release
	rm -rf "$dir"
	mkdir -p "$dir/lib"
	mv "$tmp/x/boot/vmlinuz-$release" "$dir/vmlinuz"
	mv "$tmp/x/boot/config-$release" "$dir/config"
	mv "$tmp/x/lib/modules" "$dir/lib/modules"
	rm -rf "$tmp"
	trap - EXIT
	ln -sfn "$release" "$base/current.tmp"
	mv -T "$base/current.tmp" "$base/current"
	echo "$release" >"$stamp.release"
	echo "$pkg" >"$stamp"
	say "installed $dir ($(du -sh "$dir" | cut -f1))"
}

# raise_host_limits raises each of SYSCTLS that is lower now, and records
# them all in SYSCTL_CONF so that a reboot keeps them.
raise_host_limits() {
	local kv key want have conf=""
	for kv in "${SYSCTLS[@]}"; do
		key=${kv%%=*} want=${kv#*=}
		have=$(sysctl -n "$key" 2>/dev/null) || continue
		if ((have < want)); then
			say "raising $key from $have to $want"
			sysctl -qw "$key=$want"
		else
			want=$have # a reboot must not lower it either
		fi
		conf+="$key = $want"$'\n'
	done
	[[ -n $conf ]] || return 0
	conf="# Written by corral scripts/deps.sh: host limits for many sandboxes."$'\n'"$conf"
	if [[ $(cat "$SYSCTL_CONF" 2>/dev/null) != "${conf%$'\n'}" ]]; then
		mkdir -p "$(dirname "$SYSCTL_CONF")"
		printf '%s' "$conf" >"$SYSCTL_CONF.tmp"
		mv "$SYSCTL_CONF.tmp" "$SYSCTL_CONF"
	fi
}

install_packages
install_runsc
install_rootfs
install_kernel
raise_host_limits
