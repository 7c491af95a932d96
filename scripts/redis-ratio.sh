#!/usr/bin/env bash
# Throughput of ordo's Redis gateway as a ratio to redis-server, measured side by side in one run.
#
# Starts redis-server twice (no persistence, and `appendfsync always`) and one ordo cluster per
# protocol asked for (3 replicas; 1 for unreplicated), then runs
# `redis-benchmark -t set|get -n N -c 50 -P P -r KEYS` against each, interleaved, REPEAT times.
# Ratios are taken within one repetition (the machine's load changes between runs, so only
# side-by-side numbers compare). CPU time is read from /proc/PID/stat before and after each
# benchmark, for every server process, and printed as CPU microseconds per operation (summed
# over the processes: when all share the machine's cores, throughput is the cores' seconds per
# second over this sum).
#
# Usage: scripts/redis-ratio.sh
# Environment (all optional):
#   ORDO=target/release/ordo   the ordo binary (build it with cargo build --release --bin ordo)
#   N=200000 CLIENTS=50 REPEAT=1 PIPELINES="1 16" TESTS="set get"
#   KEYS=100000                key space (redis-benchmark -r): one key would flatter every system
#   TARGETS="redis redis-aof unreplicated nezha multipaxos"
#                              redis, redis-aof, or any protocol `ordo list` names
#   ORDO_BEFORE=path           a second ordo binary (an older build, say): adds the targets
#                              PROTOCOL-before for each protocol target, measured in the same run
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
KEYS=${KEYS:-100000}
TARGETS=${TARGETS:-"redis redis-aof unreplicated nezha multipaxos"}
ORDO_BEFORE=${ORDO_BEFORE:-}
if [ -n "$ORDO_BEFORE" ]; then
    for target in $TARGETS; do
        case $target in redis | redis-aof) ;; *) TARGETS="$TARGETS $target-before" ;; esac
    done
fi
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

# start_redis TARGET PORT ARGS
start_redis() {
    local target=$1 port=$2 args=$3
    # shellcheck disable=SC2086 # args is a list of words
    redis-server --port "$port" --save "" --dir "$WORK" --appendfilename "$target.aof" --daemonize no $args \
        > "$WORK/$target.log" 2>&1 &
    STARTED+=($!)
    PORT[$target]=$port
    PIDS[$target]=$!
    NAMES[$target]=redis-server
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

port=7391
base=7700
for target in $TARGETS; do
    protocol=${target%-before}
    binary=$ORDO args=$CLUSTER_ARGS
    [ "$protocol" = "$target" ] || binary=$ORDO_BEFORE args=$CLUSTER_ARGS_BEFORE
    replicas=3
    [ "$protocol" != unreplicated ] || replicas=1
    case $target in
        redis) start_redis redis 6399 "--appendonly no" ;;
        redis-aof) start_redis redis-aof 6398 "--appendonly yes --appendfsync always" ;;
        *) start_ordo "$target" "$protocol" "$replicas" "$port" "$base" "$binary" "$args" ;;
    esac
    port=$((port + 1))
    base=$((base + 100))
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
                rps=$(redis-benchmark -p "${PORT[$target]}" -t "$test" -n "$N" -c "$CLIENTS" -P "$pipeline" -r "$KEYS" --csv 2> /dev/null |
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
echo "Median over $REPEAT repetition(s) [min-max]; ratios are ops/s over redis-server's (no persistence, and"
echo "appendfsync always) in the same repetition."
awk -F'\t' '
    function median(list,   n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        lo = a[1]; hi = a[n]
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function ratio_text(list) {
        if (list == "") return "-"
        q = median(list)
        return sprintf("%.2f [%.2f-%.2f]", q, lo, hi)
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
            key = f[2] SUBSEP f[3] SUBSEP f[4]
            redis = base[f[1] SUBSEP f[3] SUBSEP f[4] SUBSEP "redis"]
            if (redis > 0) ratio[key] = ratio[key] " " f[5] / redis
            aof = base[f[1] SUBSEP f[3] SUBSEP f[4] SUBSEP "redis-aof"]
            if (aof > 0) ratio_aof[key] = ratio_aof[key] " " f[5] / aof
        }
        printf "%-19s %-4s %-4s %26s %20s %20s %18s\n", "target", "-P", "test", "ops/s", "to redis", "to redis-aof", "CPU us/op"
        for (k = 1; k <= keys; k++) {
            key = order[k]
            split(key, p, SUBSEP)
            m = median(rps[key]); rl = lo; rh = hi
            rs = ratio_text(ratio[key])
            ra = ratio_text(ratio_aof[key])
            c = median(cpu[key])
            printf "%-19s %-4s %-4s %10.0f [%6.0f-%6.0f] %20s %20s %8.2f [%.2f-%.2f]\n", p[1], p[2], p[3], m, rl, rh, rs, ra, c, lo, hi
        }
    }' "$OUT"
echo "raw results: $OUT"
