#!/usr/bin/env bash
# Builds the host emulator of the tensor-core matmul (k_matmul_mma.cu) and runs it in its three
# schedules. Needs g++ and the CUDA headers (cuda_fp16.h), no GPU. Usage: tools/mma_emu/run.sh [quick]
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT_DIR:-/tmp/memra-mma-emu}
CUDA_INC=${CUDA_INC:-/usr/local/cuda/include}
mkdir -p "$OUT"
python3 tools/mma_emu/gen.py "$OUT/kernel_emu.inc"
objs=()
for f in tools/mma_emu/emu.cpp src/backend/cuda/weight_layout.cpp src/quant/*.cpp src/common/*.cpp; do
  o="$OUT/$(basename "$f").o"
  g++ -std=c++20 -O2 -ffp-contract=off -DFMT_HEADER_ONLY -Isrc -Itools/mma_emu -I"$OUT" -I"$CUDA_INC" -c "$f" -o "$o" &
  objs+=("$o")
  while [ "$(jobs -r | wc -l)" -ge 2 ]; do sleep 0.2; done
done
wait
g++ "${objs[@]}" -o "$OUT/emu" -fopenmp
status=0
"$OUT/emu" ${1:-} | grep -v MISMATCH | tail -1 || status=1
EMU_SHUFFLE=1 "$OUT/emu" ${1:-} | tail -1 || status=1
EMU_SHUFFLE=1 EMU_EAGER=1 "$OUT/emu" ${1:-} | tail -1 || status=1
exit $status
