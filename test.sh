#!/usr/bin/env bash
# Installs what is missing, builds everything, runs every test: the suite (with the
# Python module's), the Debian package installed and checked, the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer, the mutation campaign against the
# sanitizer build and the release build (see below), and each fuzz target for
# FUZZ_SECONDS (default 25; FUZZ_SECONDS=0 skips them). The whole run took 31.5 minutes on
# 2 cores at 40 s per target and 500/300 mutants per file (stop 18); these defaults aim at
# about 27; the CI budget is 30.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRAINPLAN_BUILD_TESTS=ON -DTRAINPLAN_BUILD_GUI=ON -DTRAINPLAN_BUILD_PYTHON=ON >/dev/null
./scripts/check-deps.sh build  # every package the configure found is installed by deps.sh
cmake --build build
ctest --test-dir build --output-on-failure
./scripts/check-deb.sh build   # the .deb installs, runs, validates and is removed again
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINPLAN_SANITIZE=ON -DTRAINPLAN_BUILD_BENCH=OFF -DTRAINPLAN_BUILD_GUI=OFF -DTRAINPLAN_BUILD_PYTHON=OFF >/dev/null
cmake --build build-asan
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure
# Mutation campaign (fixed seed): under ASan+UBSan, 350 mutants of each test scenario and
# config.json and a sample of 10 of each preset; then 200 of every file, presets included,
# against the release build (~29,000 runs; a sanitized process start costs ~50 ms).
/usr/bin/python3 scripts/mutate.py --trainplan build-asan/cli/trainplan --per-preset "${MUTANTS_PER_PRESET:-10}" \
  --per-file "${MUTANTS_PER_FILE:-350}"
/usr/bin/python3 scripts/mutate.py --trainplan build/cli/trainplan --per-preset 200 --per-file 200 --keep build/mutants-failed
./fuzz/run.sh "${FUZZ_SECONDS:-25}"
