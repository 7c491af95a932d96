#!/usr/bin/env bash
# Flame graphs of every process of a local ordo cluster under redis-benchmark load (issue 25).
#
# For each protocol and pipeline depth: starts a 3-replica cluster, drives it with
# `redis-benchmark -t set -c 50 -P P -r KEYS`, records every node process (replicas and gateway)
# with `perf record --call-graph dwarf` for SECONDS_RECORDED seconds, and writes
#   OUT/PROTOCOL-P<P>.svg      one flame graph, a tower per process (r1, r2, r3, gw)
#   OUT/PROTOCOL-P<P>-top.txt  per process, the functions with the most samples of their own
# Run it on an otherwise idle machine: perf samples CPU time, and other load changes nothing in a
# process's own profile but the wake-ups.
#
# Usage: scripts/flamegraphs.sh [OUT]     (default docs/runtime/flame)
# Environment (optional): ORDO=target/release/ordo PROTOCOLS="nezha multipaxos" PIPELINES="1 16"
#   KEYS=100000 SECONDS_RECORDED=8 FREQ=199 PORT_BASE=15000
# Needs perf and inferno (`cargo install inferno`: inferno-collapse-perf, inferno-flamegraph).
set -euo pipefail

ORDO=${ORDO:-target/release/ordo}
PROTOCOLS=${PROTOCOLS:-"nezha multipaxos"}
PIPELINES=${PIPELINES:-"1 16"}
KEYS=${KEYS:-100000}
SECONDS_RECORDED=${SECONDS_RECORDED:-8}
FREQ=${FREQ:-199}
PORT_BASE=${PORT_BASE:-15000}
REDIS_PORT=$((PORT_BASE + 19))
OUT=${1:-docs/runtime/flame}

for tool in perf redis-benchmark redis-cli inferno-collapse-perf inferno-flamegraph; do
    command -v "$tool" > /dev/null || { echo "missing $tool (perf: linux-tools; inferno: cargo install inferno)" >&2; exit 2; }
done
[ -x "$ORDO" ] || { echo "missing $ORDO: cargo build --release --bin ordo" >&2; exit 2; }
mkdir -p "$OUT"

# The node name (`--id NAME`) of an `ordo node` process.
node_name() {
    tr '\0' ' ' < "/proc/$1/cmdline" | sed -n 's/.*--id \([^ ]*\).*/\1/p'
}

for protocol in $PROTOCOLS; do
    for pipeline in $PIPELINES; do
        work=$(mktemp -d /tmp/flame.XXXXXX)
        "$ORDO" cluster up --protocol "$protocol" --replicas 3 --port-base "$PORT_BASE" --redis-port "$REDIS_PORT" \
            --data-dir "$work/data" --status-every 0 > "$work/up.log" 2>&1 &
        up=$!
        for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping > /dev/null 2>&1 && break; sleep 0.2; done
        redis-benchmark -p "$REDIS_PORT" -t set -n 100000000 -c 50 -P "$pipeline" -r "$KEYS" -q > /dev/null 2>&1 &
        bench=$!
        sleep 3
        declare -A names=()
        pids=()
        for pid in $(pgrep -P "$up"); do
            name=$(node_name "$pid")
            [ -n "$name" ] || continue
            names[$pid]=$name
            pids+=("$pid")
        done
        pid_list=$(IFS=,; echo "${pids[*]}")
        perf record -q -F "$FREQ" --call-graph dwarf,16384 -p "$pid_list" -o "$work/perf.data" -- sleep "$SECONDS_RECORDED" \
            2> "$work/perf.log"
        kill "$bench" 2> /dev/null || true
        wait "$bench" 2> /dev/null || true
        kill -INT "$up"
        wait "$up" || true
        # Each stack starts with `ordo/PID`: name the tower after the node instead.
        perf script -i "$work/perf.data" 2> /dev/null | inferno-collapse-perf --pid > "$work/folded"
        renames=()
        for pid in "${pids[@]}"; do renames+=(-e "s|^ordo/$pid;|${names[$pid]};|"); done
        sed "${renames[@]}" "$work/folded" > "$work/named"
        inferno-flamegraph --title "$protocol, redis-benchmark -t set -c 50 -P $pipeline -r $KEYS: every process" \
            --width 1600 < "$work/named" > "$OUT/$protocol-P$pipeline.svg"
        # Self samples per (process, leaf function), the twenty largest per process.
        awk '{count = $NF; $NF = ""; sub(/ $/, ""); n = split($0, frames, ";");
              process = frames[1]; leaf = frames[n]; self[process SUBSEP leaf] += count; total[process] += count}
             END {for (key in self) {split(key, part, SUBSEP);
                  printf "%s\t%.1f%%\t%s\n", part[1], 100 * self[key] / total[part[1]], part[2]}}' "$work/named" \
            | sort -t$'\t' -k1,1 -k2,2nr | awk -F'\t' '++seen[$1] <= 20' > "$OUT/$protocol-P$pipeline-top.txt"
        echo "$protocol -P $pipeline: $OUT/$protocol-P$pipeline.svg, $OUT/$protocol-P$pipeline-top.txt"
        rm -rf "$work"
        unset names
    done
done
