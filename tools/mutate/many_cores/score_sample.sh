#!/bin/bash
# Session 23: the blind mutation score (tools/mutation_score.sh) on the lent machine's 16 cores:
# 16 shards side by side, one hunt per core. Shard 0 builds first and fills ccache; the other 15
# copies of the tree then build from it.
set -u
# shellcheck source=env.sh
source "$(dirname "$0")/env.sh"
N=${N:-16} SEED=${SEED:-23} BUDGET=${BUDGET:-45} SAMPLE=${SAMPLE:-200}
S=$(date +%s)
log() { echo "== $1 at +$(( $(date +%s) - S ))s" | tee -a $OUT/summary.txt; }
log "start: N=$N SEED=$SEED BUDGET=$BUDGET SAMPLE=$SAMPLE nproc=$(nproc) $(ccache --version | head -1) $(g++ --version | head -1)"
run_shard() {
  tools/mutation_score.sh --sample $SAMPLE --seed $SEED --budget $BUDGET --shard $1/$N \
    --results $OUT/score-$1.tsv > $OUT/shard-$1.log 2>&1
  echo "shard $1 rc=$? at +$(( $(date +%s) - S ))s" >> $OUT/summary.txt
}
run_shard 0 &
p0=$!
wait_for_first_build build/mutation-shard0 $p0
log "shard 0 built"
cp build/mutation-shard0/score-out/build-original.log $OUT/ 2>/dev/null
for i in $(seq 1 $((N - 1))); do run_shard $i & done
wait
log done
ccache -s >> $OUT/summary.txt 2>&1
tail -n 3 $OUT/shard-*.log | grep -E "score:|==>" >> $OUT/summary.txt
