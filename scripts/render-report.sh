#!/usr/bin/env bash
# Renders the sizing report for "Llama-3-8B, 1T tokens, 30 days" across RTX 4090,
# A100 40/80 GB and H100 (H100 rented at $2.5/GPU-hour: the README example) to HTML and takes a headless-browser screenshot of it.
# Usage: scripts/render-report.sh [OUT_DIR]   (default build/report)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/report}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"  # absolute, for the file:// URL
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
cmake --build build --target trainplan >/dev/null
./build/cli/trainplan size llama-3-8b --tokens 1e12 --deadline-days 30 --seq-len 8192 \
  --candidates rtx-4090,a100-sxm-40gb,a100-sxm-80gb,h100-sxm --rent h100-sxm=2.5 -o "$out/sizing.html" || [ $? -eq 1 ]
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$(mktemp -d)" --hide-scrollbars \
  --window-size=1200,2600 --screenshot="$out/sizing.png" "file://$out/sizing.html" 2>/dev/null
echo "screenshot: $out/sizing.png"
