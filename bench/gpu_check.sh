#!/usr/bin/env bash
# The GPU check: run it whenever a GPU is at hand, and commit its results file with the card named in it.
#
#   bash bench/gpu_check.sh                 # on one GPU, offline: <= 10 min; writes bench/results/gpu_check.md
#   bash bench/gpu_check.sh --cpu-smoke     # no GPU: tiny sizes on CPU, writes /tmp/gpu_check_smoke.md (minutes: it compiles)
#
# What it measures (bench/gpu_check.py): what `--amp auto` chooses; a bf16 and an fp16 (GradScaler) train step of
# minbert's BertModel eager, compiled (--compile's torch.compile) and compiled with CUDA graphs, against Hugging
# Face's BertModel, at bert-base shape (random weights) and with the packaged MiniLM, with AdamW's own share; the
# peak GPU memory of each; one eager and one compiled step under torch.profiler (kernels, launch calls, GPU busy
# fraction); and the README's quick start for 1 epoch, eager and with --compile, with its dev scores. Offline:
# MiniLM comes from its pip package (requirements-model.txt), the data from data/; HF_HUB_OFFLINE=1 makes any
# attempt to reach the network fail loudly instead. Needs requirements-dev.txt (transformers) and a CUDA torch.
#
# The GPU figures are to be committed (bench/results/gpu_check.md, with the card it names) from a run on a GPU;
# the --cpu-smoke form only shows that the script works end to end, and its numbers mean nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [[ "${1:-}" == "--cpu-smoke" ]]; then
    exec python bench/gpu_check.py --cpu-smoke --out "${GPU_CHECK_OUT:-/tmp/gpu_check_smoke.md}"
fi
if [[ $# -gt 0 ]]; then
    echo "usage: bash bench/gpu_check.sh [--cpu-smoke]" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
exec timeout 600 python bench/gpu_check.py --out bench/results/gpu_check.md
