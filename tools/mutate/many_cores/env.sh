# Sourced by the many-core mutation scripts: moves to the checkout's root (R), puts the carried
# ccache (.devrun/bin, its library in .devrun/lib) first, one compiler cache for every copy.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
R=$PWD
export PATH=$R/.devrun/bin:$PATH LD_LIBRARY_PATH=$R/.devrun/lib
export CCACHE_DIR=/tmp/kvsim-ccache CCACHE_MAXSIZE=20G CCACHE_BASEDIR=$R CCACHE_NOHASHDIR=1
export KVSIM_MUTATION_JOBS=16
# wait_for_first_build WORK PID: returns once the first copy (WORK, built by PID) has built kvsim
# and started its baseline hunt, or PID has ended; the other copies then build from its cache.
wait_for_first_build() {
  while [ ! -e "$1/score-out/hunt-original.log" ] && kill -0 "$2" 2>/dev/null; do sleep 1; done
}
