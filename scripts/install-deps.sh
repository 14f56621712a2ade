#!/usr/bin/env bash
# Installs every Debian 12 package that kiln's build, tests, benchmarks and fuzzers need
# (clang-19 + libclang-rt-19-dev: libFuzzer and the sanitizer runtimes for scripts/fuzz.sh;
# libopenmpi-dev + openmpi-bin: kiln::distributed and `mpirun -np N kiln train`;
# pybind11-dev + python3-dev + python3-pytest: the kiln Python module and its tests;
# libhdf5-dev + libzip-dev: Keras 3's .keras files (model.weights.h5 inside a zip);
# libdnnl-dev: oneDNN's sgemm, timed beside kiln's GEMMs by kiln_bench only;
# chromium: tests only, the step report rendered in a headless browser, tests/report/).
# Skips packages that are already installed; needs root (or sudo) and Debian's mirror.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  llvm-19-dev llvm-19-tools libzstd-dev libedit-dev libxml2-dev libffi-dev
  libeigen3-dev libtbb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libhdf5-dev libzip-dev
  python3 python3-numpy python3-dev python3-pytest pybind11-dev clang-format
  clang-19 libclang-rt-19-dev
  libopenmpi-dev openmpi-bin
  libdnnl-dev
  chromium
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
