# Sourced by the device-call scripts from session 47 on that carry an experiment build's memra as
# .gpu/X.xz, optionally its memra_tests as .gpu/T.xz and fixtures as .gpu/fx.tar.xz, beside
# .gpu/lib.tar.xz (scripts/gpu-bundle.sh --memra X build): unpacks them into /tmp/g, sets the test
# environment, X (the memra), the synth paths f9 / f35, rows() (a bench table's rows, test column on) and
# gpu_tests FILTER.
mkdir -p /tmp/g/bin /tmp/memra-gpu && tar xJf .gpu/lib.tar.xz -C /tmp/g
[ -f .gpu/fx.tar.xz ] && tar xJf .gpu/fx.tar.xz
for b in X T; do [ -f .gpu/$b.xz ] && xz -dc .gpu/$b.xz > /tmp/g/bin/$b && chmod +x /tmp/g/bin/$b; done
export LD_LIBRARY_PATH=/tmp/g/lib MEMRA_GPU_TEST_DIR=/tmp/memra-gpu
[ -d .fixtures ] && export MEMRA_FIXTURES_DIR=$PWD/.fixtures
X=/tmp/g/bin/X
f9=/tmp/9b.gguf
f35=/tmp/memra-gpu/qwen35moe-35b-a3b-q4_0.gguf
rows() { grep -E '^\| [^-]' | grep -v '| model |' | cut -d'|' -f5-8; }
# The carried memra_tests on a filter: the verdict lines only.
gpu_tests() { timeout 200 /tmp/g/bin/T --gtest_filter="$1" 2>&1 | grep -E '^\[  (FAILED|PASSED) |^\[  FAILED|Failure' | head -12; }
