#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script). About 35-40 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings

echo "== unit, scenario and harness tests (with the canary protocols)"
cargo test --workspace --all-features --quiet

echo "== seed campaign: 200 seeds with random faults for every registered protocol (a fifth of the"
echo "   operations MULTI/EXEC transactions, some with WATCH; a fifth of the SETs expire, commands"
echo "   stamped with skewed client clocks, and sweeps of expired keys)"
cargo build --release --quiet --bin ordo
ordo=target/release/ordo
# Two protocols at a time (CI has 2 cores; each search is one thread): about 13 minutes for
# ten protocols. Each search's last lines are printed when it ends; any failure fails the run.
campaign=$(mktemp -d)
"$ordo" protocols | awk '{print $1}' | xargs -P 2 -I{} sh -c \
  '"$0" sim --protocol {} --seeds 1..200 --faults random --duration 1s --clients 12 --transactions 0.2 --expiry 0.2 > "$1/{}.txt" 2>&1;
   status=$?; tail -n 3 "$1/{}.txt"; exit $status' "$ordo" "$campaign"
rm -rf "$campaign"
# Options that change the protocol's messages get a campaign of their own.
"$ordo" sim --protocol swiftpaxos --set reads=true --seeds 1..50 --faults random --duration 1s --clients 12 --jobs 2 \
  | tail -n 3
# Nezha's durable mode, with a power cut of every node in each run on top of the random faults.
"$ordo" sim --protocol nezha --set durable=true --seeds 1..200 --faults random-clients --duration 1s --clients 12 \
  --transactions 0.2 --expiry 0.2 --jobs 2 | tail -n 3

echo "== every protocol on every latency matrix in examples/latency, no options set (10 s each)"
for matrix in examples/latency/*.toml; do
  for protocol in $("$ordo" protocols | awk '{print $1}'); do
    "$ordo" sim --protocol "$protocol" --latency "$matrix" --duration 10s > /dev/null \
      || { echo "$protocol on $matrix failed: $ordo sim --protocol $protocol --latency $matrix --duration 10s" >&2; exit 1; }
  done
  echo "$matrix: every protocol committed and passed its checks"
done

echo "== real runtime: a local cluster per protocol, driven by redis-benchmark (the real-process"
echo "   tests with Redis clients and a killed leader ran with the unit tests: crates/cli/tests/runtime.rs)"
if command -v redis-benchmark >/dev/null; then
  for protocol in $("$ordo" protocols | awk '{print $1}'); do
    data=$(mktemp -d)
    replicas=3
    [ "$protocol" = unreplicated ] && replicas=1   # one server: cluster up refuses idle replicas
    "$ordo" cluster up --protocol "$protocol" --replicas "$replicas" --redis-port 7399 --port-base 7700 \
      --data-dir "$data" --status-every 0 > "$data/up.log" 2>&1 &
    up=$!
    for _ in $(seq 100); do redis-cli -p 7399 ping >/dev/null 2>&1 && break; sleep 0.2; done
    out=$(timeout 120 redis-benchmark -p 7399 -t set,get -n 20000 -c 20 -P 4 -q 2>&1 | tr '\r' '\n' | grep -i -E "per second|error" || true)
    kill -INT "$up"; wait "$up" || true
    rm -rf "$data"
    echo "$protocol: $(echo "$out" | tr '\n' ' ')"
    if echo "$out" | grep -qi error || ! echo "$out" | grep -q "GET:"; then
      echo "redis-benchmark against $protocol failed" >&2; exit 1
    fi
  done
else
  echo "redis-benchmark not installed: skipped"
fi

echo "== Redis client libraries: redis-py's own test suite (ordo vs redis-server, at least 90% of the"
echo "   in-scope tests) and a go-redis v9 program against a 3-replica Nezha cluster (scripts/clients.sh)"
if command -v redis-server >/dev/null && command -v go >/dev/null && command -v python3 >/dev/null; then
  bash scripts/clients.sh nezha
else
  echo "redis-server, go or python3 missing: skipped" >&2
fi

echo "== ordo check on a recorded history"
history=$(mktemp)
"$ordo" sim --protocol multipaxos --duration 1s --seed 7 --history "$history" > /dev/null
"$ordo" check "$history"
rm -f "$history"

echo "== every command of the README, shortened (scripts/readme.sh)"
bash scripts/readme.sh
