#!/usr/bin/env bash
# End-to-end test of `memra serve` with the official openai Python client: creates a virtual
# environment with pinned openai + pytest + jsonschema, starts the server on a free port with a tiny fixture
# model on the CPU, runs tests/e2e/test_openai_client.py, and stops the server with SIGTERM
# (which must exit cleanly).
# Usage: tests/e2e/run.sh [MEMRA_BINARY]        (default: build/memra)
# Env: MEMRA_E2E_VENV (default build-e2e/venv), MEMRA_FIXTURES_DIR (default ../shared/fixtures).
set -euo pipefail
cd "$(dirname "$0")/../.."
MEMRA=${1:-build/memra}
FIXTURES=${MEMRA_FIXTURES_DIR:-../shared/fixtures}
MODEL=$FIXTURES/qwen35-tiny.f32.gguf
VENV=${MEMRA_E2E_VENV:-build-e2e/venv}
OPENAI_VERSION=3.57.0
PYTEST_VERSION=9.2.0

[ -x "$MEMRA" ] || { echo "e2e: no memra binary at $MEMRA (build first, or pass its path)"; exit 1; }
[ -f "$MODEL" ] || { echo "e2e: fixture model not found: $MODEL"; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
JSONSCHEMA_VERSION=4.26.0
"$VENV/bin/pip" install -q "openai==$OPENAI_VERSION" "pytest==$PYTEST_VERSION" "jsonschema==$JSONSCHEMA_VERSION"

LOG=$(mktemp)
KEY=e2e-$RANDOM$RANDOM
"$MEMRA" serve -m "$MODEL" --device cpu --host 127.0.0.1 --port 0 --ctx 2048 --max-batch 8 --api-key "$KEY" \
  --model-name tiny >"$LOG" 2>&1 &
PID=$!
cleanup() { kill -9 "$PID" 2>/dev/null || true; rm -f "$LOG"; }
trap cleanup EXIT

URL=
for _ in $(seq 1 600); do
  URL=$(grep -o 'listening on http://[^ ]*' "$LOG" | head -1 | sed 's/listening on //') || true
  [ -n "$URL" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG"; echo "e2e: memra serve exited early"; exit 1; }
  sleep 0.1
done
[ -n "$URL" ] || { cat "$LOG"; echo "e2e: memra serve did not start listening within 60 s"; exit 1; }
echo "e2e: memra serve at $URL"

rc=0
MEMRA_BASE_URL="$URL/v1" MEMRA_API_KEY="$KEY" MEMRA_MODEL_NAME=tiny \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/e2e/test_openai_client.py tests/e2e/test_structured_output.py || rc=$?

kill -TERM "$PID"
for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$PID" 2>/dev/null; then
  cat "$LOG"; echo "e2e: memra serve did not exit within 30 s of SIGTERM"; exit 1
fi
wait "$PID" || { cat "$LOG"; echo "e2e: memra serve exited with an error after SIGTERM"; exit 1; }
exit $rc
