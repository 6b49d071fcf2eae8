#!/usr/bin/env bash
# The generator study with every edit format on a GPU (issue 31): regeneration, prompt lookup, CaD and each
# diff-style format constrained and unconstrained, Qwen2.5-1.5B shapes with seeded random weights in bf16, on
# `commits` (1 case per length bucket unless the arguments say otherwise), written into docs/results/gpu/
# (generator_commits_gpu_formats.md and its _cases.csv; no plots: matplotlib is not needed). Meant for a fresh
# machine with no network:
#
#   CAD_OUTLINES_DATA=.devdata bash analysis/gpu_formats.sh [more `python -m analysis generator` arguments]
#
# $CAD_OUTLINES_DATA holds (nothing else is read):
#   tokenizers/qwen2.5/tokenizer.json, tokenizers/qwen2.5/tokenizer_config.json
#   edits/commits/click.jsonl.gz, edits/commits/requests.jsonl.gz
#   wheels/ (optional; $CAD_WHEELS names another folder): wheels of the Python packages the machine lacks, installed
#       with `pip install --no-index`. Beside torch the study imports lark, numpy, tqdm, tokenizers, transformers (and
#       transformers' own requirements); make the folder for the device's Python with e.g.
#       pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#           --platform manylinux_2_28_x86_64 -d .devdata/wheels lark transformers==5.24.0 tokenizers==0.23.3 numpy tqdm
# The compiled core is built in place (cmake, a C++17 compiler, nanobind; scikit-build-core is not needed).
# Arguments after the script's own go last, so they override its defaults; a smoke test on a CPU:
#   CAD_OUTLINES_DATA=.devdata bash analysis/gpu_formats.sh --device cpu --dtype fp32 --quick --buckets '<200' \
#       --kernel-csv docs/results/kernel_speedup.csv --out-dir /tmp/gpu_formats
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
data=${CAD_OUTLINES_DATA:?set CAD_OUTLINES_DATA to the folder holding tokenizers/qwen2.5 and edits/commits}
for f in tokenizers/qwen2.5/tokenizer.json tokenizers/qwen2.5/tokenizer_config.json \
         edits/commits/click.jsonl.gz edits/commits/requests.jsonl.gz; do
    [ -f "$data/$f" ] || { echo "gpu_formats: $data/$f is missing" >&2; exit 2; }
done
export CAD_OUTLINES_DATA="$(cd "$data" && pwd)"
wheels=${CAD_WHEELS:-$CAD_OUTLINES_DATA/wheels}
start=$(date +%s)

# Python packages: the import name -> the distribution to install when it is missing
missing=$("$py" - <<'EOF'
import importlib.util
need = {"torch": "torch", "lark": "lark", "numpy": "numpy", "tqdm": "tqdm", "tokenizers": "tokenizers",
        "transformers": "transformers"}
print(" ".join(dist for mod, dist in need.items() if importlib.util.find_spec(mod) is None))
EOF
)
if [ -n "$missing" ]; then
    case " $missing " in *" torch "*) echo "gpu_formats: torch is not installed" >&2; exit 2;; esac
    [ -d "$wheels" ] || { echo "gpu_formats: missing Python packages ($missing) and no wheel folder $wheels" >&2; exit 2; }
    echo "gpu_formats: installing $missing from $wheels"
    PIP_BREAK_SYSTEM_PACKAGES=1 "$py" -m pip install -q --no-index --find-links "$wheels" $missing
fi

# the compiled core, in place (cad_outlines/_native/_core*.so), unless this checkout has one for this Python
if ! "$py" -c "import cad_outlines._native._core" 2>/dev/null; then
    echo "gpu_formats: building the compiled core"
    "$py" -m cad_outlines._native.build > build-native.log 2>&1 || { tail -30 build-native.log >&2; exit 2; }
    "$py" -c "import cad_outlines._native._core"
fi
export CAD_OUTLINES_CACHE=${CAD_OUTLINES_CACHE:-$PWD/.cache/cad_outlines}
echo "gpu_formats: ready in $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null || true

"$py" -m analysis generator --device cuda --dtype bf16 --config qwen2.5-1.5b --dataset commits --limit 1 \
    --regen-sample 16 --kernel-csv docs/results/gpu/kernel_speedup.csv --out-dir docs/results/gpu \
    --report-name generator_commits_gpu_formats --no-plot "$@"
echo "gpu_formats: done in $(( $(date +%s) - start )) s"
