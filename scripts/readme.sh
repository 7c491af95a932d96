#!/usr/bin/env bash
# Runs every command of the README's bash blocks, as a newcomer would type them, and fails when
# one exits non-zero or prints an inconclusive verdict. scripts/test.sh runs it after the
# release build. Long runs are shortened (durations, seed ranges, request counts: the rewrites
# below); the commands themselves are the README's. Commands that run until stopped (`cluster
# up`, `ordo node`) run in the background or under a time limit, and the commands after them
# talk to them. `cargo bench` lines are compiled, not run (a benchmark takes minutes).
set -uo pipefail
cd "$(dirname "$0")/.."
readme=${1:-README.md}

# A scratch directory for what the commands write (run.jsonl, results/): the checkout stays clean.
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
export PATH="$PWD/target/release:$PATH"
repo=$PWD

# Every line of every ```bash block, comments and blank lines dropped.
commands() {
  awk '/^```bash/ {inside=1; next} /^```/ {inside=0} inside' "$readme" \
    | sed -e 's/[[:space:]]#.*$//' -e '/^[[:space:]]*$/d' -e '/^#/d'
}

# The README's command, made short: the same command with less work.
shorten() {
  sed -E \
    -e 's/cargo run --release --bin ordo --/ordo/' \
    -e 's/--duration [0-9]+s/--duration 1s/g' \
    -e 's/--seeds 1\.\.[0-9]+/--seeds 1..8/g' \
    -e 's/ -n [0-9]+/ -n 4000/g' \
    -e 's/--clients 1,8,64/--clients 1,8/g' \
    -e 's/--rate 2000,8000,16000/--rate 2000,8000/g' \
    -e 's/ordo reproduce all *$/ordo reproduce all --quick/' \
    -e 's#docs/reproduce/#'"$repo"'/docs/reproduce/#g' \
    -e 's#examples/#'"$repo"'/examples/#g' <<<"$1"
}

wait_for_redis() {
  for _ in $(seq 150); do
    redis-cli -p 7379 ping >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

failed=0
cluster=
# Ctrl-C, as the README says; a cluster that has not stopped after 20 s is a failure.
stop_cluster() {
  [ -n "$cluster" ] || return 0
  kill -INT "$cluster"
  for _ in $(seq 100); do kill -0 "$cluster" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$cluster" 2>/dev/null; then
    echo "FAIL  cluster up did not stop on Ctrl-C"; kill -KILL "$cluster"; failed=1
  fi
  wait "$cluster"
  cluster=
}
run() {
  local line=$1 command status output
  command=$(shorten "$line")
  case "$command" in
    *"cargo bench"*) command="$command --no-run" ;;
  esac
  case "$command" in
    *"redis-cli"* | *"redis-benchmark"* | *curl*) ;;
    *) stop_cluster ;;  # as the README says: the cluster's ports are free again after Ctrl-C
  esac
  case "$command" in
    *"cluster up"*)
      (cd "$work" && eval "exec $command --data-dir $work/cluster --wipe-data-dir --status-every 0") > "$work/up.log" 2>&1 &
      cluster=$!
      if wait_for_redis; then echo "ok    $line"; else
        echo "FAIL  $line (no Redis port after 30 s)"; cat "$work/up.log"; failed=1
      fi
      return
      ;;
    *"ordo node"*)
      # A node runs until stopped: it must still be up (timeout's 124) after two seconds.
      output=$(cd "$work" && timeout 2 bash -c "$command" 2>&1); status=$?
      [ "$status" = 124 ] && status=0
      ;;
    *"redis-cli"* | *"redis-benchmark"* | *curl*)
      command -v "${command%% *}" >/dev/null || { echo "skip  $line (no ${command%% *})"; return; }
      output=$(cd "$work" && timeout 120 bash -c "$command" 2>&1); status=$?
      ;;
    cargo*)
      output=$(timeout 900 bash -c "$command" 2>&1); status=$?
      ;;
    *)
      output=$(cd "$work" && timeout 600 bash -c "$command" 2>&1); status=$?
      ;;
  esac
  if [ "$status" != 0 ] || grep -q -E "UNKNOWN|linearizable unknown|^\(error\)" <<<"$output"; then
    echo "FAIL  $line (exit $status)"
    tail -n 20 <<<"$output"
    failed=1
  else
    echo "ok    $line"
  fi
}

while IFS= read -r line; do
  case "$line" in
    # Given: the build and PATH this script has, and the test suite that runs this script.
    *"export PATH"* | "cargo build --release --bin ordo"* | "bash scripts/test.sh"*) echo "given $line"; continue ;;
  esac
  run "$line"
done < <(commands)
stop_cluster
exit $failed
