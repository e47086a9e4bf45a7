#!/usr/bin/env bash
# Run Corral's tests: installs what is missing (as scripts/setup.sh does,
# without starting a daemon), then vets, lints (staticcheck at the version
# go.mod pins, checks as staticcheck.conf says) and runs every test. As
# root the integration tests create real gVisor sandboxes; without root
# they skip with a reason. Extra arguments go to `go test` (e.g. -run
# TestE2E).
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${CORRAL_STATE_DIR:-/var/lib/corral}
export PATH=$PATH:/usr/local/go/bin

if [ "$(id -u)" = 0 ]; then
	scripts/deps.sh
	export CORRAL_RUNSC=$STATE/bin/runsc
	export CORRAL_BASE_ROOTFS=$STATE/rootfs/debian-bookworm
	export CORRAL_VM_KERNEL=$STATE/vm/kernel/current
fi
test -z "$(gofmt -l $(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $(git ls-files '*.go'); exit 1; }
go vet ./...
go tool staticcheck ./...
# Tests that compare latencies on this host (a neighbour beside a CPU
# burner, the selftest's cases) run alone, after everything else: with
# other packages' guests spinning beside them they would measure the load,
# not Corral.
# Extra arguments (a -run of the caller's) run as given, in one pass.
# Every phase goes through test/testlog, which prints the run's time, each
# package's and the slowest tests at its end; as root the times are also
# appended to /var/cache/corral-test/times.jsonl (never under $STATE: an
# installed daemon's directory is its own).
set -o pipefail
start=$SECONDS
logdir=$(mktemp -d)
testlog=$logdir/testlog failures=$logdir/failures
go build -o "$testlog" ./test/testlog
save=(-failures "$failures")
if [ "$(id -u)" = 0 ] && mkdir -p /var/cache/corral-test; then save+=(-save /var/cache/corral-test/times.jsonl); fi
# -vet=off: go vet ./... above ran every analyzer; go test's own subset
# would analyse every package a second time.
gotest() { go test -json -vet=off "$@" | "$testlog" "${save[@]}"; }
if [ $# -gt 0 ]; then
	gotest -count=1 -timeout 75m "$@" ./...
	exit
fi
quiet='^(TestNoisyNeighbour|TestSelftest)$'
status=0
# The e2e tests run in parallel (docs/TESTING.md): -parallel bounds them;
# they wait on subprocesses and guests more than they compute. The e2e
# package, the run's longest by far, is named first so that go test builds
# and starts it first; the other packages share the second of the -p slots.
gotest -count=1 -timeout 75m -parallel 6 -skip "$quiet" ./test/e2e/ ./... || status=$?
gotest -count=1 -timeout 45m -run "$quiet" ./test/e2e/ || status=$?
# Every phase's failures again, last, where a CI log's tail shows them.
if [ -s "$failures" ]; then echo "== scripts/test.sh: what failed, in every phase"; cat "$failures"; fi
echo "== scripts/test.sh: $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s in all (exit $status)"
exit $status
