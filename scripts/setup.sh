#!/usr/bin/env bash
# Set up Corral on a fresh Debian 12 machine (as root) and start the daemon:
# installs what is missing (mmdebstrap, runsc, the base root filesystem),
# builds and installs /usr/local/bin/corral, and (re)starts `corral serve`
# with its embedded default (SQLite) on 127.0.0.1:7070. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=${CORRAL_STATE_DIR:-/var/lib/corral}
LISTEN=${CORRAL_LISTEN:-127.0.0.1:7070}
LOG=${CORRAL_LOG:-/var/log/corral.log}
export PATH=$PATH:/usr/local/go/bin

scripts/deps.sh
echo "building corral"
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(git describe --always --dirty 2>/dev/null || echo dev)" \
	-o /usr/local/bin/corral.new ./cmd/corral
mv /usr/local/bin/corral.new /usr/local/bin/corral

# Restart the daemon; running sandboxes survive and are adopted.
if [ -f "$STATE/daemon.pid" ] && kill -0 "$(cat "$STATE/daemon.pid")" 2>/dev/null; then
	echo "stopping the running daemon"
	kill "$(cat "$STATE/daemon.pid")"
	for _ in $(seq 600); do kill -0 "$(cat "$STATE/daemon.pid")" 2>/dev/null || break; sleep 0.1; done
fi
# The state dir and the log are root's alone (the daemon makes them so
# too): they hold the API token, sandboxes' records and what they print.
chmod 700 "$STATE"
(umask 077 && touch "$LOG") && chmod 600 "$LOG"
nohup /usr/local/bin/corral serve --state-dir "$STATE" --listen "$LISTEN" --log-file "$LOG" >>"$LOG" 2>&1 </dev/null &
(umask 077 && echo $! >"$STATE/daemon.pid")
# ensure_e2b_base makes sure the E2B "base" template's image exists (the
# daemon builds it, from the build cache when it can, at the first create
# from "base"): one sandbox from it, killed at once.
ensure_e2b_base() {
	local key id
	key="X-API-KEY: e2b_$(cat "$STATE/token")"
	echo "making sure the E2B base template is built"
	id=$(curl -fsS -X POST -H "$key" -H 'Content-Type: application/json' -d '{"templateID":"base","timeout":60}' \
		"http://$LISTEN/e2b/v2/sandboxes" | sed -n 's/.*"sandboxID":"\([^"]*\)".*/\1/p') || true
	if [ -z "$id" ]; then
		echo "building the E2B base template failed (see $LOG)" >&2
		exit 1
	fi
	curl -fsS -X DELETE -H "$key" "http://$LISTEN/e2b/sandboxes/$id" >/dev/null
}

# Before it serves, a daemon adopts every sandbox still running (one at a
# time: 499 took 22 s here), so wait as long as it lives, up to 10 minutes.
for i in $(seq 6000); do
	if curl -fsS "http://$LISTEN/v1/health" >/dev/null 2>&1; then
		echo "corral daemon running at http://$LISTEN (token: $STATE/token, log: $LOG)"
		ensure_e2b_base
		exit 0
	fi
	kill -0 "$(cat "$STATE/daemon.pid")" 2>/dev/null || break
	((i != 100)) || echo "corral daemon still starting (adopting the sandboxes that kept running)"
	sleep 0.1
done
echo "corral daemon failed to start; last log lines:" >&2
tail -n 20 "$LOG" >&2
exit 1
