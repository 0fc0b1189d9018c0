# Sourced by the SGLang-bundle hunt scripts: `source bundle_env.sh KVSIM SOURCE_DIR WORK_DIR
# [BUDGET_S]`. Sets kvsim, src, work and budget (default 60), skips (exit 77) without the SGLang
# bundle beside the checkout or without torch for /usr/bin/python3, exports KVSIM_SOURCE_DIR and
# empties WORK_DIR.
kvsim="$1"; src="$2"; work="$3"; budget="${4:-60}"
bundle="$src/../shared/sglang/sglang-slice.bundle"
[ -f "$bundle" ] || { echo "no SGLang bundle at $bundle: skipped"; exit 77; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "no torch for /usr/bin/python3: skipped"; exit 77; }
export KVSIM_SOURCE_DIR="$src"
rm -rf "$work"; mkdir -p "$work"
