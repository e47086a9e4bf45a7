#!/usr/bin/env bash
# What telemetry costs: `corral bench` (time to interactive and exec round
# trip, beside raw runsc) against a daemon with telemetry on, then one with
# it off, alternating ROUNDS times, each on a fresh state directory and its
# own network table, so nothing of a real daemon is touched. Prints each
# run's corral lines and the medians of the p50s, on against off.
#
#   sudo scripts/bench-telemetry.sh      # metering and the audit trail on vs off
#   OFF_FLAGS="--audit=false" sudo -E scripts/bench-telemetry.sh   # the trail alone
#
# ON_FLAGS / OFF_FLAGS are the serve flags of each side (OFF_FLAGS default
# --metering=false --audit=false), N the
# samples per figure (default 30), ROUNDS the runs per side (default 3),
# CORRAL_BIN a corral binary to use (default: built from this checkout).
# On a shared test host, run it under the host lock:
#   flock /tmp/corral-host.lock scripts/bench-telemetry.sh
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${CORRAL_STATE_DIR:-/var/lib/corral}
N=${N:-30}
ROUNDS=${ROUNDS:-3}
ON_FLAGS=${ON_FLAGS:-}
OFF_FLAGS=${OFF_FLAGS:---metering=false --audit=false}
[ "$(id -u)" = 0 ] || { echo "bench-telemetry: needs root (sandboxes and the raw runsc baseline)" >&2; exit 1; }

work=$(mktemp -d /tmp/corral-bench-telemetry.XXXXXX)
daemon_pid=
cleanup() {
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
	for st in "$work"/state-*/; do [ -d "$st" ] && release "${st%/}"; done
	rm -rf "$work"
	nft delete table inet corral-bench 2>/dev/null || true
}
trap cleanup EXIT
if [ -n "${CORRAL_BIN:-}" ]; then
	cp "$CORRAL_BIN" "$work/corral"
else
	CGO_ENABLED=0 go build -o "$work/corral" ./cmd/corral
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# bench_once SIDE FLAGS...: one daemon, one `corral bench`, its report in
# $work/SIDE.N.txt.
bench_once() {
	local side=$1 run=$2; shift 2
	local st="$work/state-$side-$run" addr="127.0.0.1:$(free_port)"
	"$work/corral" serve --state-dir "$st" --listen "$addr" --envd-listen "127.0.0.1:$(free_port)" --ports-listen "127.0.0.1:$(free_port)" \
		--runsc "$STATE/bin/runsc" --base-rootfs "$STATE/rootfs/debian-bookworm" --vm-kernel "$STATE/vm/kernel/current" \
		--warm-pool 0 --net-table corral-bench --net-link-prefix crb --net-pool 10.90.0.0/16 \
		--dns-port "$(free_port)" --proxy-port "$(free_port)" --net-log-group 7719 "$@" >"$st.log" 2>&1 &
	daemon_pid=$!
	for _ in $(seq 300); do
		curl -sf "http://$addr/v1/health" >/dev/null 2>&1 && [ -s "$st/token" ] && break
		sleep 0.1
	done
	CORRAL_URL="http://$addr" CORRAL_TOKEN=$(cat "$st/token") "$work/corral" bench -n "$N" --file-mib 8 \
		--runsc "$STATE/bin/runsc" --rootfs "$STATE/rootfs/debian-bookworm" >"$work/$side.$run.txt"
	kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=
	release "$st"
}

# release STATE: the daemon's bind mount of runsc's null namespace goes
# (it outlives the daemon), then the state directory.
release() {
	umount -l "$1/runsc/null-netns" 2>/dev/null || true
	rm -rf "$1"
}

for r in $(seq "$ROUNDS"); do
	# shellcheck disable=SC2086
	bench_once on "$r" $ON_FLAGS
	# shellcheck disable=SC2086
	bench_once off "$r" $OFF_FLAGS
done

# p50 SECTION FILE: the corral p50 (ms) of a section of a bench report.
p50() {
	awk -v sec="$1" 'index($0, sec) == 1 {in_sec = 1; next} /^$/ {in_sec = 0}
		in_sec && $1 == "corral" && $2 == "p50" {v = $3; sub(/ms$/, "", v); if ($3 ~ /µs$/) {sub(/µs$/, "", v); v /= 1000}; print v; exit}' "$2"
}
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "corral bench -n $N, $ROUNDS rounds alternating; on: serve ${ON_FLAGS:-(defaults)}; off: serve $OFF_FLAGS"
for side in on off; do
	for r in $(seq "$ROUNDS"); do
		echo "--- $side, round $r"
		grep -E '^(time to interactive|exec round trip)|^  corral ' "$work/$side.$r.txt" || true
	done
done
echo
for sec in "time to interactive" "exec round trip"; do
	on=$(for r in $(seq "$ROUNDS"); do p50 "$sec" "$work/on.$r.txt"; done | median)
	off=$(for r in $(seq "$ROUNDS"); do p50 "$sec" "$work/off.$r.txt"; done | median)
	awk -v s="$sec" -v on="$on" -v off="$off" 'BEGIN {printf "%-22s p50 median  on %7.1fms  off %7.1fms  cost %+.1f%%\n", s, on, off, (on / off - 1) * 100}'
done
