#!/usr/bin/env bash
# The cluster's scaling benchmark (internal/cluster/scalebench): the real
# placement code against a throwaway PostgreSQL (pg_stat_statements
# loaded) with simulated nodes and a fake runtime, at each node count and
# control-instance count, each for DURATION. No sandboxes, no daemon, no
# root needed beyond what PostgreSQL's test instance needs (as root it runs
# as the postgres user). Figures: docs/SCALING.md.
#
#   scripts/bench-cluster.sh                     # 100,1000,10000 nodes; 1,000,000 records; heartbeats alone, then 2 and 8 controls
#   NODES=1000 RECORDS=100000 scripts/bench-cluster.sh
#
# NODES, CONTROLS (comma-separated), RECORDS, LIVE (live records per
# node), PLACERS (creates at once per control), DURATION (each
# measurement), HEARTBEAT (each node's interval; 0s: none), SHIPEVERY
# (each node's audit shipments; 0s: none), LIVEEVERY (each node's
# shipments of its live sandboxes' running usage; 0s: none; 60s as
# internal/cluster/node's liveEvery, 5s its earlier one), LIVENEW (true:
# a new sandbox's first figures go at its node's next shipment, as the
# node's do since liveEvery is a minute; false: as before).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -count=1 -timeout 2h -run '^TestScale$' ./internal/cluster/scalebench/ -v -args \
	-scale.nodes="${NODES:-100,1000,10000}" -scale.controls="${CONTROLS:-0,2,8}" \
	-scale.records="${RECORDS:-1000000}" -scale.live="${LIVE:-50}" -scale.placers="${PLACERS:-4}" \
	-scale.duration="${DURATION:-15s}" -scale.heartbeat="${HEARTBEAT:-5s}" \
	-scale.shipevery="${SHIPEVERY:-1s}" -scale.liveevery="${LIVEEVERY:-60s}" \
	-scale.livenew="${LIVENEW:-true}"
