#!/usr/bin/env bash
# Screenshots of the main GUI views in a real X server (Xvfb), for review of the
# look: docs/gui/{results,sweeps,plan,compare,advice}.png by default.
# Usage: scripts/gui-screenshots.sh [OUT_DIR] [SCENARIO.toml]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/gui}"
scenario="${2:-tests/data/scenarios/gui-demo.toml}"
if ! command -v xvfb-run >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq xvfb xauth >/dev/null
fi
TRAINPLAN_GUI=1 ./scripts/deps.sh
cmake -S . -B build -G Ninja -DTRAINPLAN_BUILD_GUI=ON >/dev/null
cmake --build build --target trainplan-gui
xvfb-run -a -s "-screen 0 1280x800x24" ./build/gui/trainplan-gui --scenario "$scenario" --screenshots "$out" 2>/dev/null
echo "screenshots in $out"
