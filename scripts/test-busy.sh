#!/usr/bin/env bash
# The suite on a busy machine: from a fresh clone under `mktemp -d` (a private
# folder), `npm ci`, then `npm test` RUNS times (3 by default) while another
# process keeps one core fully busy. Prints pass/fail per run; exits non-zero
# unless every run passed. Clones the committed HEAD of this checkout.
#
#   scripts/test-busy.sh            # RUNS=3
#   RUNS=1 scripts/test-busy.sh
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-3}
dir=$(mktemp -d)
hog=
cleanup() {
  [ -n "$hog" ] && kill "$hog" 2>/dev/null
  if [ "${failed:-0}" = 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$dir"; else echo "logs kept in $dir"; fi
}
trap cleanup EXIT
echo "clone of $(git -C "$src" rev-parse --short HEAD) in $dir (mode $(stat -c %a "$dir"))"
git clone -q "$src" "$dir/c" || { failed=1; echo "git clone failed"; exit 1; }
cd "$dir/c" || exit 1
if ! npm ci --no-audit --no-fund >"$dir/npm-ci.log" 2>&1; then
  failed=1
  echo "npm ci failed: $dir/npm-ci.log"
  exit 1
fi
node -e 'for(;;){}' &
hog=$!
echo "one core kept busy by pid $hog"
pass=0
failed=0
for i in $(seq 1 "$runs"); do
  t0=$(date +%s)
  if npm test >"$dir/run-$i.log" 2>&1; then result=pass; pass=$((pass + 1)); else result=FAIL; failed=1; fi
  summary=$(grep -E '^# \{ total' "$dir/run-$i.log" | tail -1)
  echo "run $i: $result in $(($(date +%s) - t0)) s ${summary#\# }"
  if [ "$result" = FAIL ]; then grep -E '^\s*not ok' "$dir/run-$i.log" | head -20; fi
done
echo "$pass of $runs runs passed"
[ "$pass" -eq "$runs" ]
