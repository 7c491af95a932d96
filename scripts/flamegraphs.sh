#!/usr/bin/env bash
# Flame graphs of every process of a local ordo cluster under redis-benchmark load (issue 25).
#
# For each protocol and pipeline depth: starts a 3-replica cluster, drives it with
# `redis-benchmark -t set -c 50 -P P -r KEYS`, records every node process (replicas and gateway)
# with `perf record --call-graph dwarf` for SECONDS_RECORDED seconds, and writes
#   OUT/PROTOCOL-P<P>.svg      one flame graph, a tower per process (r1, r2, r3, gw)
#   OUT/PROTOCOL-P<P>-top.txt  per process, the hottest leaf functions and the hottest of ordo's own
# Each tower of the graph is a node, then its threads. Run it on an otherwise idle machine: perf samples CPU time, and other load changes nothing in a
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
        # One recording per process, all at once: each stack is then named after its node.
        recorders=()
        for pid in "${pids[@]}"; do
            perf record -q -F "$FREQ" --call-graph dwarf,16384 -p "$pid" -o "$work/$pid.data" \
                -- sleep "$SECONDS_RECORDED" 2> "$work/$pid.log" &
            recorders+=($!)
        done
        wait "${recorders[@]}"
        kill "$bench" 2> /dev/null || true
        wait "$bench" 2> /dev/null || true
        kill -INT "$up"
        wait "$up" || true
        : > "$work/named"
        for pid in "${pids[@]}"; do
            perf script -i "$work/$pid.data" 2> /dev/null | inferno-collapse-perf \
                | sed "s|^|${names[$pid]};|" >> "$work/named"
        done
        inferno-flamegraph --title "$protocol, redis-benchmark -t set -c 50 -P $pipeline -r $KEYS: every process" \
            --width 1600 --minwidth 0.5 < "$work/named" > "$OUT/$protocol-P$pipeline.svg"
        # Per process, the twenty functions with the most samples of their own (the leaf), then
        # the twenty of ordo's own functions with the most samples in them or in the library and
        # kernel code they call (the innermost `ordo_` frame of each sample).
        top() {
            awk -v ours="$1" '{count = $NF; $NF = ""; sub(/ $/, ""); n = split($0, frames, ";");
                  at = n; if (ours) { while (at > 1 && frames[at] !~ /ordo_/) at--; if (at == 1) next }
                  hot[frames[1] SUBSEP frames[at]] += count; total[frames[1]] += count}
                 END {for (key in hot) {split(key, part, SUBSEP);
                      printf "%s\t%.1f%%\t%s\n", part[1], 100 * hot[key] / total[part[1]], part[2]}}' "$work/named" \
                | sort -t$'\t' -k1,1 -k2,2nr | awk -F'\t' '++seen[$1] <= 20'
        }
        {
            echo "# $protocol, -P $pipeline: per process, share of its samples"
            echo "## where the CPU is (leaf functions)"
            top 0
            echo "## which of ordo's functions it is in (innermost ordo_ frame; samples without one left out)"
            top 1
        } > "$OUT/$protocol-P$pipeline-top.txt"
        echo "$protocol -P $pipeline: $OUT/$protocol-P$pipeline.svg, $OUT/$protocol-P$pipeline-top.txt"
        rm -rf "$work"
        unset names
    done
done
