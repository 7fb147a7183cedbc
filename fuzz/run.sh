#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (AddressSanitizer + UBSan) and runs
# each for SECONDS (default 60) from a seed corpus of the shipped presets and
# test fixtures. Fails on any crash, leak, timeout or sanitizer report; a
# finding is left in build-fuzz/findings/ (add it to tests/data/fuzz/<target>/).
# Inputs up to 128 kB (past the 80 kB header that once overflowed the stack, and
# far past the 64-level nesting limit), with dictionaries of the keys each parser
# reads (fuzz/toml.dict, fuzz/hf_config.dict).
# Long run: fuzz/run.sh 3600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
[ "$seconds" -gt 0 ] || exit 0
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINPLAN_BUILD_FUZZ=ON \
  -DTRAINPLAN_BUILD_TESTS=OFF -DTRAINPLAN_BUILD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer" >/dev/null
cmake --build build-fuzz
mkdir -p build-fuzz/findings
seed() {  # target, then source globs
  local dir="build-fuzz/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -n "$f" "$dir/" 2>/dev/null || true; done
}
seed model_toml models/*.toml tests/data/bad/*.toml tests/data/extreme/*.toml tests/data/fuzz/model_toml/*
seed hardware_toml hardware/gpu/*.toml hardware/link/*.toml hardware/node/*.toml tests/data/fuzz/hardware_toml/*
seed scenario_toml tests/data/scenarios/*.toml tests/data/bad/bad-*.toml tests/data/fuzz/scenario_toml/*
seed hf_config tests/data/hf/*.json tests/data/bad/*.json tests/data/fuzz/hf_config/*
mkdir -p build-fuzz/corpus/cli
printf 'fit\nllama-2-7b\n--gpu\nrtx-4090\n' > build-fuzz/corpus/cli/fit
printf 'simulate\nllama-2-13b\n--gpu\na100-sxm-80gb\n--gpus\n8\n--tp\n2\n--zero\n1\n' > build-fuzz/corpus/cli/simulate
printf 'plan\n7b\n--gpu\nh100-sxm\n--gpus\n16\n--global-batch\n64\n' > build-fuzz/corpus/cli/plan
printf 'advise\ngpt2\n--gpu\nrtx-4090\n--gpu-temp\n88\n' > build-fuzz/corpus/cli/advise
cp -n tests/data/fuzz/cli/* build-fuzz/corpus/cli/ 2>/dev/null || true
status=0
for t in model_toml hardware_toml scenario_toml hf_config cli; do
  echo "fuzz_$t: ${seconds}s"
  case $t in
    hf_config) dict=(-dict=fuzz/hf_config.dict) ;;
    cli) dict=() ;;
    *) dict=(-dict=fuzz/toml.dict) ;;
  esac
  rm -f build-fuzz/findings/$t-*
  if ! ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/fuzz/fuzz_$t "build-fuzz/corpus/$t" -max_total_time="$seconds" -timeout=20 \
       -rss_limit_mb=4096 -max_len=131072 "${dict[@]}" -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t-" > "build-fuzz/fuzz_$t.log" 2>&1; then
    echo "fuzz_$t FOUND A PROBLEM (see build-fuzz/fuzz_$t.log and build-fuzz/findings/):"
    tail -30 "build-fuzz/fuzz_$t.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|Done" "build-fuzz/fuzz_$t.log" | tail -1
  fi
done
if [ $status -eq 0 ]; then echo "fuzz: 5 passed, 0 failed"; else echo "fuzz: some targets failed"; fi
exit $status
