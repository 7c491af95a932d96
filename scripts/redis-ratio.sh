#!/usr/bin/env bash
# Throughput of ordo's Redis gateway as a ratio to redis-server, measured side by side in one run.
#
# Starts redis-server (no persistence), an unreplicated ordo cluster and a 3-replica Nezha cluster,
# then runs `redis-benchmark -t set|get -n N -c 50 -P P` against each, interleaved, REPEAT times.
# Ratios are taken within one repetition (the machine's load changes between runs, so only
# side-by-side numbers compare). CPU time is read from /proc/PID/stat before and after each
# benchmark, for every server process, and printed as CPU microseconds per operation.
#
# Usage: scripts/redis-ratio.sh
# Environment (all optional):
#   ORDO=target/release/ordo   the ordo binary (build it with cargo build --release --bin ordo)
#   N=200000 CLIENTS=50 REPEAT=1 PIPELINES="1 16" TESTS="set get"
#   TARGETS="redis unreplicated nezha"
#   ORDO_BEFORE=path           a second ordo binary (an older build, say): adds the targets
#                              unreplicated-before and nezha-before, measured in the same run
#   CLUSTER_ARGS_BEFORE=...    `cluster up` arguments for ORDO_BEFORE (default: CLUSTER_ARGS);
#                              with ORDO_BEFORE=$ORDO it compares two configurations of one build
#   CLUSTER_ARGS=""            extra `ordo cluster up` arguments, e.g. "--no-fsync --clients 256"
#   OUT=/tmp/redis-ratio.tsv   raw results, one line per benchmark
set -euo pipefail

ORDO=${ORDO:-target/release/ordo}
N=${N:-200000}
CLIENTS=${CLIENTS:-50}
REPEAT=${REPEAT:-1}
PIPELINES=${PIPELINES:-"1 16"}
TESTS=${TESTS:-"set get"}
TARGETS=${TARGETS:-"redis unreplicated nezha"}
ORDO_BEFORE=${ORDO_BEFORE:-}
[ -z "$ORDO_BEFORE" ] || TARGETS="$TARGETS unreplicated-before nezha-before"
CLUSTER_ARGS=${CLUSTER_ARGS:-}
CLUSTER_ARGS_BEFORE=${CLUSTER_ARGS_BEFORE-$CLUSTER_ARGS}
OUT=${OUT:-/tmp/redis-ratio.tsv}
WORK=$(mktemp -d /tmp/redis-ratio.XXXXXX)
TICKS=$(getconf CLK_TCK)

for tool in redis-server redis-benchmark; do
    command -v "$tool" > /dev/null || { echo "missing $tool: apt-get install -y redis-tools redis-server" >&2; exit 2; }
done
for binary in "$ORDO" ${ORDO_BEFORE:+"$ORDO_BEFORE"}; do
    [ -x "$binary" ] || { echo "missing $binary: cargo build --release --bin ordo" >&2; exit 2; }
done

declare -A PORT PIDS NAMES
STARTED=()

cleanup() {
    # Stop only what this script started, by pid.
    for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2> /dev/null || true; done
    for pid in "${STARTED[@]}"; do wait "$pid" 2> /dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

start_redis() {
    PORT[redis]=6399
    redis-server --port 6399 --save "" --appendonly no --daemonize no > "$WORK/redis.log" 2>&1 &
    STARTED+=($!)
    PIDS[redis]=$!
    NAMES[redis]=redis-server
}

# start_ordo TARGET PROTOCOL REPLICAS REDIS_PORT PORT_BASE BINARY ARGS
start_ordo() {
    local target=$1 protocol=$2 replicas=$3 port=$4 base=$5 binary=$6 args=$7
    # shellcheck disable=SC2086 # args is a list of words
    # A fresh data directory per run: the default one (under ~/.local/share) would restart the
    # previous run's cluster, log and all.
    "$binary" cluster up --protocol "$protocol" --replicas "$replicas" --redis-port "$port" --port-base "$base" \
        --data-dir "$WORK/$target.data" --status-every 0 $args > "$WORK/$target.log" 2>&1 &
    STARTED+=($!)
    PORT[$target]=$port
    for _ in $(seq 100); do
        grep -q "Ctrl-C stops" "$WORK/$target.log" && break
        sleep 0.2
    done
    grep -q "Ctrl-C stops" "$WORK/$target.log" || { cat "$WORK/$target.log" >&2; exit 1; }
    PIDS[$target]=$(awk '/^started/ { printf "%s ", $4 }' "$WORK/$target.log")
    NAMES[$target]=$(awk '/^started/ { printf "%s ", $2 }' "$WORK/$target.log")
}

# CPU ticks (user + system) of each pid, space separated.
cpu_ticks() {
    local pid
    for pid in "$@"; do
        # Fields 14 and 15 of /proc/PID/stat; the command name (field 2) may hold spaces, so cut after ")".
        sed 's/.*) //' "/proc/$pid/stat" | awk '{ printf "%d ", $12 + $13 }'
    done
}

for target in $TARGETS; do
    case $target in
        redis) start_redis ;;
        unreplicated) start_ordo unreplicated unreplicated 1 7391 7700 "$ORDO" "$CLUSTER_ARGS" ;;
        nezha) start_ordo nezha nezha 3 7392 7800 "$ORDO" "$CLUSTER_ARGS" ;;
        unreplicated-before) start_ordo unreplicated-before unreplicated 1 7393 7900 "$ORDO_BEFORE" "$CLUSTER_ARGS_BEFORE" ;;
        nezha-before) start_ordo nezha-before nezha 3 7394 8000 "$ORDO_BEFORE" "$CLUSTER_ARGS_BEFORE" ;;
        *) echo "unknown target $target" >&2; exit 2 ;;
    esac
done
sleep 1

printf "rep\ttarget\tpipeline\ttest\tops_per_s\tcpu_us_per_op_total\tcpu_us_per_op_by_process\n" > "$OUT"
for rep in $(seq "$REPEAT"); do
    for pipeline in $PIPELINES; do
        for test in $TESTS; do
            for target in $TARGETS; do
                # shellcheck disable=SC2206 # pid and name lists are words
                pids=(${PIDS[$target]}) names=(${NAMES[$target]})
                before=($(cpu_ticks "${pids[@]}"))
                rps=$(redis-benchmark -p "${PORT[$target]}" -t "$test" -n "$N" -c "$CLIENTS" -P "$pipeline" --csv 2> /dev/null |
                    awk -F'"' 'NR == 2 { print $4 }')
                after=($(cpu_ticks "${pids[@]}"))
                by_process=""
                total=0
                for i in "${!pids[@]}"; do
                    us=$(awk -v d=$((after[i] - before[i])) -v t="$TICKS" -v n="$N" 'BEGIN { printf "%.2f", d * 1e6 / t / n }')
                    by_process+="${names[$i]}=$us "
                    total=$(awk -v a="$total" -v b="$us" 'BEGIN { printf "%.2f", a + b }')
                done
                printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$rep" "$target" "$pipeline" "$test" "${rps:-0}" "$total" "$by_process" >> "$OUT"
                printf "rep %s  %-19s -P %-3s %-4s %12s ops/s  %6s CPU us/op  (%s)\n" \
                    "$rep" "$target" "$pipeline" "$test" "${rps:-0}" "$total" "$by_process"
            done
        done
    done
done

echo
echo "Median over $REPEAT repetition(s) [min-max]; ratio = ops/s / redis-server's ops/s in the same repetition."
awk -F'\t' '
    function median(list,   n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        lo = a[1]; hi = a[n]
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR == 1 { next }
    {
        key = $2 SUBSEP $3 SUBSEP $4
        if (!(key in seen)) { seen[key] = 1; order[++keys] = key }
        rps[key] = rps[key] " " $5
        cpu[key] = cpu[key] " " $6
        base[$1 SUBSEP $3 SUBSEP $4 SUBSEP $2] = $5
        row[++rows] = $0
    }
    END {
        for (r = 1; r <= rows; r++) {
            split(row[r], f, "\t")
            redis = base[f[1] SUBSEP f[3] SUBSEP f[4] SUBSEP "redis"]
            key = f[2] SUBSEP f[3] SUBSEP f[4]
            if (redis > 0) ratio[key] = ratio[key] " " f[5] / redis
        }
        printf "%-19s %-4s %-4s %26s %20s %18s\n", "target", "-P", "test", "ops/s", "ratio to redis", "CPU us/op"
        for (k = 1; k <= keys; k++) {
            key = order[k]
            split(key, p, SUBSEP)
            m = median(rps[key]); rl = lo; rh = hi
            rs = "-"
            if (key in ratio) { q = median(ratio[key]); rs = sprintf("%.2f [%.2f-%.2f]", q, lo, hi) }
            c = median(cpu[key])
            printf "%-19s %-4s %-4s %10.0f [%6.0f-%6.0f] %20s %8.2f [%.2f-%.2f]\n", p[1], p[2], p[3], m, rl, rh, rs, c, lo, hi
        }
    }' "$OUT"
echo "raw results: $OUT"
