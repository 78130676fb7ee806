#!/usr/bin/env bash
# The FIRE-paper-style run on a GPU: every encoding trained at 512 tokens, evaluated up to 8,192 (16x).
# Usage: benchmarks/gpu_compare.sh [OUT]   (default runs/gpu-compare; about 1-2 hours on one recent GPU)
# Needs CUDA; exits with status 1 and one line when there is none.
set -euo pipefail
OUT=${1:-runs/gpu-compare}
PY=${PYTHON:-.venv/bin/python}
LTSGEN=${LTSGEN:-.venv/bin/ltsgen}

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_compare.sh: no CUDA device visible to torch ($("$PY" -c 'import torch; print(torch.__version__)')); this benchmark needs a GPU" >&2
  exit 1
fi
"$PY" -c "import torch; print('device:', torch.cuda.get_device_name(0), '| torch', torch.__version__)"

# stories long enough for 8,192-token evaluation sequences (about 6,500+ words at vocab 8192)
"$LTSGEN" stories --out "$OUT/lts" --num-stories 12000 --min-words 500 --max-words 32000 \
  --splits train=0.98,validation=0.02 --workers "$(nproc)" --seed 0
"$LTSGEN" compare --data "$OUT/lts" --encodings all --vocab-size 8192 \
  --train-length 512 --eval-lengths 512,1024,2048,4096,8192 \
  --steps 4000 --batch-size 64 --lr 6e-4 --d-model 384 --layers 6 --heads 6 \
  --eval-sequences 64 --batch-tokens 65536 --compile --device cuda --out "$OUT/compare"
echo "report: $OUT/compare/report.md"
