#!/bin/bash
# Session 23: re-hunts the given mutant ids (IDS) blind on the lent machine, dealt round-robin
# to N workers (each its own copy and build, KVSIM_MUTATION_WORK=build/mscore-I), one hunt per
# core. Worker 0 builds first and fills ccache. Everything comes back in one tarball.
set -u
# shellcheck source=env.sh
source "$(dirname "$0")/env.sh"
N=${N:-16} BUDGET=${BUDGET:-45}
res=/tmp/mscore-results; mkdir -p $res
S=$(date +%s)
log() { echo "== $1 at +$(( $(date +%s) - S ))s" | tee -a $res/summary.txt; }
read -r -a ids <<<"$IDS"
log "start: ${#ids[@]} ids, N=$N BUDGET=$BUDGET"
declare -a part
for k in "${!ids[@]}"; do part[$((k % N))]+="${ids[$k]} "; done
run_worker() {
  KVSIM_MUTATION_WORK=build/mscore-$1 tools/mutation_score.sh --ids "${part[$1]}" --budget $BUDGET \
    --results $res/score-$1.tsv > $res/worker-$1.log 2>&1
  echo "worker $1 rc=$? at +$(( $(date +%s) - S ))s" >> $res/summary.txt
}
run_worker 0 &
p0=$!
wait_for_first_build build/mscore-0 $p0
log "worker 0 built"
for i in $(seq 1 $((N - 1))); do [ -n "${part[$i]:-}" ] && run_worker $i & done
wait
log done
tar czf $OUT/results.tgz -C /tmp mscore-results -C "$R" $(ls -d build/mscore-*/score-out)
cp $res/summary.txt $OUT/
