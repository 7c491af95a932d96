#!/usr/bin/env bash
# Real Redis client libraries against a real ordo cluster (issue 23):
#  - redis-py's own test suite (the redis 8.1.0 sdist's tests/test_commands.py, test_pipeline.py and
#    test_connection.py), run against redis-server and against `ordo cluster up` on this machine,
#    compared by tests/clients/redis-py/compare.py over the command families ordo implements
#    (fails below 90% of what passes against redis-server);
#  - tests/clients/go-redis: go-redis v9 at its defaults (RESP3): strings, hashes, lists, sets,
#    sorted sets, a 20-client WATCH/MULTI/EXEC counter and expiry.
# Usage: bash scripts/clients.sh [PROTOCOL]   (default nezha). Needs python3, go and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
protocol=${1:-nezha}
work=target/clients
mkdir -p "$work"
cargo build --release --quiet --bin ordo
ordo=$PWD/target/release/ordo

if [ ! -d "$work/redis-8.1.0" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet redis==8.1.0 pytest pytest-asyncio pytest-timeout mock packaging numpy
  "$work/venv/bin/pip" download --quiet --no-deps --no-binary :all: redis==8.1.0 -d "$work"
  tar -xzf "$work/redis-8.1.0.tar.gz" -C "$work"
fi

stop() { for pid in "$@"; do kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done; }
# Ready when a replicated write commits (PING is answered by the gateway alone, before the
# replicas have a leader).
wait_port() {
  for _ in $(seq 150); do [ "$(redis-cli -p "$1" set clients-sh-ready 1 2>/dev/null)" = OK ] && return 0; sleep 0.2; done
  echo "nothing answers a SET on port $1" >&2; return 1
}
# --tb=no: formatting the tracebacks of the ~200 failing out-of-scope tests took minutes; the
# junit report keeps each failure's message, which compare.py prints.
suite() { # PORT REPORT
  (cd "$work/redis-8.1.0" && "../venv/bin/python" -m pytest tests/test_commands.py tests/test_pipeline.py \
    tests/test_connection.py --redis-url="redis://127.0.0.1:$1" -p no:cacheprovider -q --timeout 20 --tb=no \
    --junitxml="$2" > "$2.log" 2>&1) || true
  tail -n 1 "$2.log"
}

echo "== redis-py's test suite against redis-server $(redis-server --version | awk '{print $3}')"
redis-server --port 7390 --save "" --appendonly no --dir "$work" > "$work/redis-server.log" 2>&1 &
server=$!
wait_port 7390
suite 7390 "$PWD/$work/redis-server.xml"
stop "$server"

echo "== redis-py's test suite against ordo cluster up --protocol $protocol --replicas 3"
data=$(mktemp -d)
"$ordo" cluster up --protocol "$protocol" --replicas 3 --redis-port 7391 --port-base 7800 --data-dir "$data" \
  --status-every 0 > "$work/cluster.log" 2>&1 &
cluster=$!
trap 'stop $cluster; rm -rf "$data"' EXIT
wait_port 7391
suite 7391 "$PWD/$work/ordo.xml"
"$work/venv/bin/python" tests/clients/redis-py/compare.py "$work/redis-server.xml" "$work/ordo.xml"

echo "== go-redis v9 at its defaults against the same cluster"
(cd tests/clients/go-redis && go run . -addr 127.0.0.1:7391)
