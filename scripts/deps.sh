#!/usr/bin/env bash
# Installs the Debian packages memra builds against (the CUDA toolkit is optional and not
# installed here: with nvcc on PATH or at /usr/local/cuda the CUDA backend is built too).
set -euo pipefail
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build pkg-config git libgtest-dev libbenchmark-dev \
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libfmt-dev libpcre2-dev libutf8proc-dev \
  python3 python3-venv >/dev/null
