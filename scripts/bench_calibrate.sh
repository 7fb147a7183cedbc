#!/bin/bash
# Benchmark for `trainplan calibrate` (issue 13: 20 runs in under a second).
# Writes 20 run files whose "measured" figures are the model's own predictions
# under a known calibration (GEMM x0.9, HBM x0.8, attention x0.95, links x0.7 /
# x0.75, reserve +0.03, framework +0.5 GiB), then times the fit, which should
# recover those factors.  Usage: scripts/bench_calibrate.sh [path/to/trainplan]
set -euo pipefail
TP=$(realpath "${1:-./build/cli/trainplan}")
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR"
cat > truth.toml <<'EOT'
[calibration]
gemm = 0.9
hbm = 0.8
attention = 0.95
intra_link = 0.7
inter_link = 0.75
reserve_fraction = 0.03
framework_gib = 0.5
EOT
i=0
for spec in "llama-2-7b a100-sxm-80gb 8 8 1 1 8 1 4096 1 64 true" "llama-2-13b h100-sxm 8 8 8 1 1 0 4096 1 16 true" \
  "llama-3-8b h100-sxm 32 8 1 1 32 3 8192 1 64 true" "gpt2 a100-sxm-80gb 1 1 1 1 1 0 1024 16 16 false" \
  "llama-3.2-1b h100-sxm 1 1 1 1 1 0 32768 1 8 true" "llama-2-70b a100-sxm-80gb 64 8 8 2 4 1 4096 1 128 true" \
  "llama-2-7b h100-sxm 16 8 2 1 8 1 4096 2 128 true" "mistral-7b a100-sxm-80gb 8 8 1 1 8 3 4096 1 32 true" \
  "llama-3-8b a100-sxm-80gb 16 8 4 1 4 1 8192 1 64 true" "llama-2-13b a100-sxm-80gb 32 8 8 1 4 1 4096 1 64 true"; do
  for mb in 1 2; do
    set -- $spec
    f=run$i.toml
    printf '[model]\npreset = "%s"\n[hardware]\ngpu = "%s"\ngpus = %s\ngpus_per_node = %s\n[training]\nzero = %s\nseq_len = %s\nmicro_batch = %s\nglobal_batch = %s\nflash_attention = %s\n[parallel]\ntp = %s\npp = %s\ndp = %s\n' \
      "$1" "$2" "$3" "$4" "$8" "$9" "$mb" $(( ${11} * mb )) "${12}" "$5" "$6" "$7" > $f
    j=$("$TP" simulate --scenario $f --calibration truth.toml --json)
    python3 - "$j" >> $f <<'EOT'
import json, sys
j = json.loads(sys.argv[1])
print("[measured]")
print("step_time_s =", j["time"]["step_s"])
print("device_memory_gib =", j["memory"]["total_bytes"] / 2**30)
EOT
    i=$((i+1))
  done
done
start=$(date +%s.%N)
"$TP" calibrate run*.toml -o fitted.toml | sed -n '1,11p'
end=$(date +%s.%N)
echo "trainplan calibrate on $i runs, end to end: $(echo "$end - $start" | bc) s  [budget 1 s]"
