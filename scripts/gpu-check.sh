#!/usr/bin/env bash
# The one command for the GPU machine: runs every GPU test and the standard benchmarks and prints
# a summary. Usage (from the repository root, on a machine with an NVIDIA GPU):
#   scripts/gpu-check.sh            # tests + standard benchmarks
#   scripts/gpu-check.sh tests      # GPU tests only
#   scripts/gpu-check.sh bench      # benchmarks only
#   QUICK=1 scripts/gpu-check.sh    # skips the slow 9B-shaped all-types test, 2 repetitions, depth
#                                   # 4096 only for 9B Q4_0 (fits a short device lease)
# The build directory (BUILD, default build-gpu) is used as is when it holds a CUDA build (binaries
# built on another machine can be carried over); otherwise it is configured and built here.
# Results: bench/results/<date>-gpu-check.{md,jsonl} (and copies under $OUT when set).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-all}
BUILD=${BUILD:-build-gpu}
WORK=${MEMRA_GPU_WORK:-/tmp/memra-gpu}
QUICK=${QUICK:-0}
REPS=${REPS:-$([ "$QUICK" = 1 ] && echo 2 || echo 5)}
mkdir -p "$WORK" bench/results
STAMP=$(date -u +%Y-%m-%d-%H%M)
MD=bench/results/$STAMP-gpu-check.md
JSONL=bench/results/$STAMP-gpu-check.jsonl
[ -d .fixtures ] && export MEMRA_FIXTURES_DIR=$PWD/.fixtures
export MEMRA_GPU_TEST_DIR=$WORK

if [ ! -x "$BUILD/memra" ] || [ ! -x "$BUILD/memra_tests" ]; then
  echo "== building ($BUILD, sm_90)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMRA_CUDA=ON -DMEMRA_EMBED_DEMO=OFF || exit 1
  cmake --build "$BUILD" -j"$(nproc)" || exit 1
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

test_status="not run"
if [ "$MODE" = all ] || [ "$MODE" = tests ]; then
  echo "== GPU tests"
  FILTER='Gpu*:CudaLayout*'
  [ "$QUICK" = 1 ] && FILTER='Gpu*:CudaLayout*-GpuModel.Synth9b*:GpuAttentionPerf*'
  "$BUILD/memra_tests" --gtest_filter="$FILTER" --gtest_brief=1 2>&1 | tee "$WORK/gpu-tests.log"
  rc=${PIPESTATUS[0]}
  failed=$(grep -c '^\[  FAILED  \].*(' "$WORK/gpu-tests.log" || true)
  skipped=$(grep -c '^\[  SKIPPED \].*(' "$WORK/gpu-tests.log" || true)
  summary=$(grep -E '^\[  PASSED  \]|tests? ran' "$WORK/gpu-tests.log" | tail -2 | tr '\n' ' ')
  test_status="rc=$rc; $summary failed=$failed skipped=$skipped"
fi

if [ "$MODE" = all ] || [ "$MODE" = bench ]; then
  echo "== standard benchmarks"
  {
    echo "# gpu-check $STAMP (commit $COMMIT)"
    echo
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/GPU: /'
    echo
  } > "$MD"
  for spec in "qwen35 9b q4_0" "qwen35 9b q8_0" "qwen35 2b q4_0"; do
    set -- $spec
    f="$WORK/$1-$2-$3.gguf"
    [ -f "$f" ] || "$BUILD/memra" synth --arch "$1" --shape "$2" --type "$3" -o "$f" || exit 1
    DEPTHS=0,4096
    [ "$QUICK" = 1 ] && [ "$spec" != "qwen35 9b q4_0" ] && DEPTHS=0
    "$BUILD/memra" bench -m "$f" --device cuda -p 512 -n 128 -d "$DEPTHS" -r "$REPS" --ctx 8192 --jsonl "$JSONL" \
      | tee -a "$MD"
    echo >> "$MD"
  done
fi

echo
echo "== summary (commit $COMMIT)"
echo "GPU tests: $test_status"
[ -f "$MD" ] && grep -E '^\| ' "$MD" | grep -v -- '---' | sort -u
if [ -n "${OUT:-}" ]; then
  cp -f "$WORK/gpu-tests.log" "$OUT/" 2>/dev/null || true
  cp -f "$MD" "$JSONL" "$OUT/" 2>/dev/null || true
fi
