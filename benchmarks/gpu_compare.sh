#!/usr/bin/env bash
# The papers' protocols on a GPU, each with 95% intervals (seeds and documents crossed) and claims.csv (every
# test Holm-corrected; verdicts only for trained models):
#   1. APE's figure grid: RoPE, ALiBi and APE trained at 64, 128 and 256 tokens on LongTinyStories, evaluated
#      from 64 to 4,096 tokens (perplexity, extrapolation penalty and attention entropy against the length).
#   2. The same grid on real TinyStories (TINYSTORIES=...), the APE paper's own training data: its stories are
#      short, so it is evaluated on the buckets' concatenated held-out stream (stories joined by EOS).
#   3. FIRE's C4 setting: every encoding trained at 2,048 tokens on C4 length buckets, evaluated at 512 to
#      8,192 on the buckets' concatenated held-out stream (--eval-concat): 64 sequences of 8,192 tokens, each
#      cut to every length (the same text at every length).
#
# Deviations from the papers, by design of a one-GPU recipe (say them beside any figure quoted from it):
#   - model size: 6 layers, width 384, 6 heads (about 11M parameters without embeddings), far below FIRE's
#     base and large models; APE's paper does not state its size here, so ours is the same at every part;
#   - tokens: 4,000 steps of 64 x 64-256 tokens (APE grid) and of 16 x 2,048 tokens (C4: 131M tokens), far
#     fewer than the papers';
#   - data: APE's grid runs on LongTinyStories built here (part 1) beside real TinyStories (part 2, the
#     paper's data); FIRE's C4 part uses C4 files you give and a BPE tokenizer of 8,192 trained on them (the
#     paper uses T5's SentencePiece vocabulary);
#   - evaluation: the same-token extrapolation penalty is scored on every 16th of the last T tokens at
#     T = 2,048 (--window-stride 16: 128 tokens per sequence, 8,192 per length), on all of them below;
#   - APE is ltsgen's own parameterisation (docs/encodings.md), the paper's code being unavailable.
#
# Usage: benchmarks/gpu_compare.sh [OUT]                      (default OUT: runs/gpu-compare)
#   C4="c4/en/c4-train.0000*-of-01024.json.gz"  allenai/c4 files for part 3 (quote the glob; one file gives far
#                                               more than the 64 x 8,192 held-out tokens it needs); without C4,
#                                               part 3 is skipped with a line saying so
#   TINYSTORIES="TinyStories-train.txt"         the TinyStories text (stories separated by <|endoftext|>) for
#                                               part 2; without it, part 2 is skipped with a line saying so
#   TINY=1   every step at a toy size on the CPU (the repository's C4 and TinyStories samples), to check the
#            script itself
#   SEEDS=0,1,2,3,4   WORKERS=N (runs at once; default 1 on a GPU)   PYTHON, LTSGEN (default: the checkout's
#   .venv/bin/..., wherever the script is run from)
# Without CUDA (and without TINY=1) it stops with status 1 and one line. A rerun keeps what is finished.
set -euo pipefail
OUT=${1:-runs/gpu-compare}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)  # the checkout: its .venv and samples
PY=${PYTHON:-$ROOT/.venv/bin/python}
LTSGEN=${LTSGEN:-$ROOT/.venv/bin/ltsgen}
SEEDS=${SEEDS:-0,1,2,3,4}
WORKERS=${WORKERS:-1}

if [[ "${TINY:-0}" == 1 ]]; then
  DEVICE=cpu
  C4=${C4:-$ROOT/tests/fixtures/c4_en/c4-train.00000-of-01024.first400.json.gz}
  TINYSTORIES=${TINYSTORIES:-$ROOT/tests/fixtures/tinystories/tinystories_sample_eot.txt}
  TS_BUCKETS=(--bucket-lengths 16,32,64,128 --eval-lengths 16,32,64,128 --eval-sequences 4)
  TS_RUN=(--train-lengths 16 --eval-lengths 16,32,64,128 --steps 20 --batch-size 8)
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  STORIES=(--num-stories 120 --min-words 150 --max-words 1500 --splits train=0.9,validation=0.1)
  VOCAB=512
  APE_GRID=(--train-lengths 16,32 --eval-lengths 16,32,64,128 --steps 20 --batch-size 8)
  C4_BUCKETS=(--bucket-lengths 64,128,256,512 --eval-lengths 64,128,256 --eval-sequences 4)
  C4_RUN=(--train-lengths 64 --eval-lengths 64,128,256 --steps 20 --batch-size 8 --window-stride 4)
  MODEL=(--d-model 32 --n-layers 2 --n-heads 2 --eval-sequences 4)
else
  if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_compare.sh: no CUDA device visible to torch ($("$PY" -c 'import torch; print(torch.__version__)')); this benchmark needs a GPU (TINY=1 runs it on the CPU at a toy size)" >&2
    exit 1
  fi
  "$PY" -c "import torch; print('device:', torch.cuda.get_device_name(0), '| torch', torch.__version__)"
  DEVICE=cuda
  C4=${C4:-}
  TINYSTORIES=${TINYSTORIES:-}
  TS_BUCKETS=(--bucket-lengths 64,128,256,512,1024,2048,4096 --eval-lengths 64,128,256,512,1024,2048,4096 --eval-sequences 64)
  TS_RUN=(--train-lengths 64,128,256 --eval-lengths 64,128,256,512,1024,2048,4096 --steps 4000 --batch-size 64)
  STORIES=(--num-stories 12000 --min-words 500 --max-words 32000 --splits train=0.98,validation=0.02)
  VOCAB=8192
  APE_GRID=(--train-lengths 64,128,256 --eval-lengths 64,128,256,512,1024,2048,4096 --steps 4000 --batch-size 64)
  C4_BUCKETS=(--bucket-lengths 512,1024,2048,4096,8192,16384 --eval-lengths 512,1024,2048,4096,8192 --eval-sequences 64)
  C4_RUN=(--train-lengths 2048 --eval-lengths 512,1024,2048,4096,8192 --steps 4000 --batch-size 16 --window-stride 16)
  MODEL=(--d-model 384 --n-layers 6 --n-heads 6 --eval-sequences 64 --batch-tokens 65536 --compile)
fi
COMMON=(--device "$DEVICE" --seeds "$SEEDS" --workers "$WORKERS" --vocab-size "$VOCAB" --lr 6e-4 "${MODEL[@]}")

# 1. APE's figure grid on LongTinyStories (long enough for 4,096-token evaluation sequences)
"$LTSGEN" stories --out "$OUT/lts" "${STORIES[@]}" --seed 0 --no-progress
"$LTSGEN" tokenizer --data "$OUT/lts" --vocab-size "$VOCAB" --out "$OUT/lts-tokenizer.json"
"$LTSGEN" compare --data "$OUT/lts" --tokenizer "$OUT/lts-tokenizer.json" --encodings rope,alibi,ape \
  "${APE_GRID[@]}" "${COMMON[@]}" --out "$OUT/ape-grid"
echo "APE grid: $OUT/ape-grid/report.md"

# 2. APE's grid on real TinyStories, evaluated on the concatenated held-out stream
if [[ -z "$TINYSTORIES" ]]; then
  echo "gpu_compare.sh: TINYSTORIES is not set, so the TinyStories part is skipped (TINYSTORIES=path/TinyStories-train.txt runs it)" >&2
else
  "$LTSGEN" tokenizer --source text --input "$TINYSTORIES" --separator '<|endoftext|>' --vocab-size "$VOCAB" \
    --out "$OUT/ts-tokenizer.json"
  "$LTSGEN" buckets --source text --input "$TINYSTORIES" --separator '<|endoftext|>' --tokenizer "$OUT/ts-tokenizer.json" \
    --out "$OUT/ts" "${TS_BUCKETS[@]}" --eval-concat --splits train=0.98,validation=0.02 --workers "$(nproc)" --no-progress
  "$LTSGEN" compare --data "$OUT/ts" --encodings rope,alibi,ape "${TS_RUN[@]}" "${COMMON[@]}" --eval-concat \
    --out "$OUT/ape-grid-tinystories"
  echo "APE grid on TinyStories: $OUT/ape-grid-tinystories/report.md"
fi

# 3. FIRE's C4 setting, from C4 length buckets, evaluated on their concatenated held-out stream
if [[ -z "$C4" ]]; then
  echo "gpu_compare.sh: C4 is not set, so FIRE's C4 setting is skipped (C4=\"path/c4-train.*.json.gz\" runs it)" >&2
  exit 0
fi
# shellcheck disable=SC2086  # C4 may be a glob or several files
"$LTSGEN" tokenizer --source c4 --input $C4 --vocab-size "$VOCAB" --max-documents 200000 --out "$OUT/c4-tokenizer.json"
# shellcheck disable=SC2086
"$LTSGEN" buckets --source c4 --input $C4 --tokenizer "$OUT/c4-tokenizer.json" --out "$OUT/c4" \
  "${C4_BUCKETS[@]}" --eval-concat --splits train=0.99,validation=0.01 --workers "$(nproc)" --no-progress
"$LTSGEN" compare --data "$OUT/c4" --encodings all "${C4_RUN[@]}" "${COMMON[@]}" --eval-concat --out "$OUT/fire-c4"
echo "FIRE's C4 setting: $OUT/fire-c4/report.md"
