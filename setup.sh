#!/usr/bin/env bash
# Installs what is missing, builds, and answers the first question trainplan is
# for: will a full fine-tune of Llama-2-13B fit on one RTX 4090?
set -euo pipefail
cd "$(dirname "$0")"
TRAINPLAN_GUI=0 TRAINPLAN_DEV=0 TRAINPLAN_PYTHON=0 ./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target trainplan
status=0
./build/cli/trainplan fit llama-2-13b --gpu rtx-4090 || status=$?
# exit 1 = "does not fit" (an answer); 2 = bad input
[ "$status" -le 1 ]
