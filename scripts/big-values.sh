#!/usr/bin/env bash
# Large values through every protocol's real cluster with redis-py, as a new user would (issue 20):
# for each protocol, `ordo cluster up` (3 replicas; 1 for unreplicated), then 20 SETs and GETs
# in a row of 1 MiB and of 16 MiB values, each read back whole, then a small SET
# (tests/clients/redis-py/big_values.py). Fails when a value reads back wrong or a SET or GET
# takes more than a second. A measurement on a real machine, so not part of scripts/test.sh;
# crates/cli/tests/big_values.rs checks the values themselves in the suite.
# Usage: bash scripts/big-values.sh [PROTOCOL...]   (default: every registered protocol)
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/clients
cargo build --release --quiet --bin ordo
ordo=$PWD/target/release/ordo
if [ ! -x "$work/venv/bin/python" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet redis==8.1.0
fi
protocols=("$@")
[ ${#protocols[@]} -gt 0 ] || mapfile -t protocols < <("$ordo" protocols | awk '{print $1}')
failed=()
for protocol in "${protocols[@]}"; do
  data=$(mktemp -d)
  replicas=3
  [ "$protocol" = unreplicated ] && replicas=1
  "$ordo" cluster up --protocol "$protocol" --replicas "$replicas" --redis-port 7398 --port-base 7600 \
    --data-dir "$data" --status-every 0 > "$data/up.log" 2>&1 &
  up=$!
  for _ in $(seq 150); do [ "$(redis-cli -p 7398 set big-values-ready 1 2>/dev/null)" = OK ] && break; sleep 0.2; done
  echo "== $protocol"
  "$work/venv/bin/python" tests/clients/redis-py/big_values.py 7398 || failed+=("$protocol")
  kill -INT "$up"; wait "$up" || true
  rm -rf "$data"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "large values failed for: ${failed[*]}" >&2
  exit 1
fi
echo "every protocol served 20 SETs and GETs of 1 MiB and of 16 MiB, each within a second"
