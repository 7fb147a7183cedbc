#!/usr/bin/env bash
# Installs what is missing, builds everything, runs every test (ctest).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINPLAN_BUILD_TESTS=ON >/dev/null
cmake --build build
ctest --test-dir build --output-on-failure
