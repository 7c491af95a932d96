#!/usr/bin/env bash
# Tempo's 5-region WAN table (specs/tempo.md §8.2, §8.5) with the CLI: Tempo f=1 and f=2 and
# Multi-Paxos (leader in Ireland, WAN time-outs) — per client site mean latency, the mean of the
# sites (the paper's "average"), next to the paper's numbers. Then the throughput comparison
# (cargo bench -p ordo-sim --bench tempo_wan, part "throughput").
# Usage: scripts/tempo-wan.sh [seconds]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --release --bin ordo >/dev/null
ordo="$CARGO_TARGET_DIR/release/ordo"
common=(--replicas 5 --latency examples/latency/aws-5-regions.toml --workload conflict:0.02 --clients 40
  --duration "${seconds}s" --json)
multipaxos_wan=(--set heartbeat_ns=50000000 --set view_change_timeout_ns=2000000000
  --set client_retry_ns=3000000000 --set pipeline_max=64)
row() {
  python3 -c '
import json, sys
label, paper = sys.argv[1], sys.argv[2]
d = json.load(sys.stdin)
assert d["progress"] and d["linearizable"] and d["agreement"], d
means = [s["mean"] for s in d["sites"]]
cells = " ".join(f"{m:>10.1f}" for m in means)
print(f"{label:<16} {cells} {sum(means)/len(means):>10.1f} {d[\"latency_ms\"][\"mean\"]:>8.1f}  {paper}")
' "$1" "$2"
}
printf '%-16s %10s %10s %10s %10s %10s %10s %8s  %s\n' protocol ireland n-calif singapore canada sao-paulo "site mean" overall paper
"$ordo" sim --protocol tempo --f 1 "${common[@]}" | row "tempo f=1" "138 (average)"
"$ordo" sim --protocol tempo --f 2 "${common[@]}" | row "tempo f=2" "178 (average)"
"$ordo" sim --protocol multipaxos --f 1 "${common[@]}" "${multipaxos_wan[@]}" | row "multipaxos" \
  "majority quorum = FPaxos f=2: IE 142, SG 323, SP 325 (FPaxos f=1: IE 82, SG 264, SP 267)"
ORDO_TEMPO_PART=throughput cargo bench -p ordo-sim --bench tempo_wan
