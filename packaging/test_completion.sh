#!/usr/bin/env bash
# The generated bash completion completes what the command line defines:
# subcommands, flags of a subcommand, values of an enumerated flag.
# usage: test_completion.sh GENERATED_DIR
set -euo pipefail
source "$1/trainplan.bash"
complete_words() {  # complete_words WORD... -> completions of the last word
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _trainplan; echo "${COMPREPLY[*]}"
}
check() { [ "$1" = "$2" ] || { echo "completion: expected '$2', got '$1'" >&2; exit 1; }; }
check "$(complete_words trainplan si)" "simulate size"
check "$(complete_words trainplan fit llama-2-7b --meth)" "--method"
check "$(complete_words trainplan fit llama-2-7b --method q)" "qlora"
check "$(complete_words trainplan simulate x --recompute s)" "selective"
check "$(complete_words trainplan plan x --max-m)" "--max-micro-batch"
echo "completion: ok"
