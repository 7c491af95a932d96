#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script). About 10-15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== format and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets --all-features --quiet -- -D warnings

echo "== unit, scenario and harness tests (with the canary protocols)"
cargo test --workspace --all-features --quiet

echo "== seed campaign: 200 seeds with random faults for every registered protocol"
cargo build --release --quiet --bin ordo
ordo=target/release/ordo
for protocol in $("$ordo" protocols | awk '{print $1}'); do
  "$ordo" sim --protocol "$protocol" --seeds 1..200 --faults random --duration 1s --clients 6 | tail -n 3
done

echo "== ordo check on a recorded history"
history=$(mktemp)
"$ordo" sim --protocol multipaxos --duration 1s --seed 7 --history "$history" > /dev/null
"$ordo" check "$history"
rm -f "$history"
