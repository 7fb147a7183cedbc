#!/usr/bin/env bash
# Builds the Debian package from a configured and built build tree, installs it
# on this machine and checks it as a user would meet it: `trainplan --version`,
# `trainplan fit` (presets and the Hugging Face id map from /usr/share/trainplan,
# no source tree), `man trainplan`, the bash completion, the desktop entry
# (desktop-file-validate) and `import trainplan` from Debian's dist-packages.
# Then `dpkg -r` leaves the machine as it was found (also on failure).
# usage: scripts/check-deb.sh [BUILD_DIR]   (default build; needs root for dpkg)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
if dpkg-query -W -f='${Status}' trainplan 2>/dev/null | grep -q "ok installed"; then
  echo "check-deb: a trainplan package is already installed; not replacing it" >&2; exit 2
fi

start=$(date +%s)
rm -rf "$build/package"
(cd "$build" && cpack -G DEB -B "$build/package" >/dev/null)
deb=$(ls "$build"/package/trainplan_*.deb)
echo "check-deb: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

fail() { echo "check-deb: FAIL: $*" >&2; exit 1; }
cleanup() { $SUDO dpkg -r trainplan >/dev/null 2>&1 || true; }
trap cleanup EXIT
$SUDO dpkg -i "$deb" >/dev/null

# Run from an empty directory, without the build tree's presets or the user's.
scratch=$(mktemp -d); trap 'cleanup; rm -rf "$scratch"' EXIT
cd "$scratch"
export TRAINPLAN_NO_BUILD_TREE_PRESETS=1 XDG_CONFIG_HOME="$scratch/config" HF_HUB_CACHE="$scratch/hf-cache"
unset PYTHONPATH

version=$(dpkg-query -W -f='${Version}' trainplan)
[ "$(/usr/bin/trainplan --version)" = "trainplan $version" ] || fail "trainplan --version does not print the package version $version"

/usr/bin/trainplan fit llama-2-13b --gpu rtx-4090 --method qlora --json > fit.json || fail "trainplan fit (QLoRA) exit $?"
/usr/bin/python3 -c 'import json,sys; sys.exit(0 if json.load(open("fit.json"))["memory"]["fits"] is True else 1)' \
  || fail "llama-2-13b QLoRA on rtx-4090 should fit"
set +e
/usr/bin/trainplan fit meta-llama/Llama-2-13b-hf --gpu rtx-4090 > hub.txt 2>&1; rc=$?
set -e
[ $rc -eq 1 ] || fail "fit meta-llama/Llama-2-13b-hf (id map) exit $rc, expected 1 (does not fit): $(cat hub.txt)"

man -P cat trainplan 2>/dev/null | grep -q "Memory per GPU" || fail "man trainplan does not render"
for c in fit simulate plan size; do
  man -P cat trainplan 2>/dev/null | grep -q "^ *$c" || fail "man trainplan lacks the $c command"
done

words=$(bash -c 'source /usr/share/bash-completion/completions/trainplan
  COMP_WORDS=(trainplan fit --meth); COMP_CWORD=2; _trainplan; printf "%s\n" "${COMPREPLY[@]}"')
[ "$words" = "--method" ] || fail "bash completion of 'trainplan fit --meth' gave '$words'"
gpus=$(bash -c 'source /usr/share/bash-completion/completions/trainplan
  COMP_WORDS=(trainplan fit llama-2-7b --gpu a100-s); COMP_CWORD=4; _trainplan; printf "%s " "${COMPREPLY[@]}"')
[ "$gpus" = "a100-sxm-40gb a100-sxm-80gb " ] || fail "bash completion of '--gpu a100-s' gave '$gpus'"
value=$(bash -c 'source /usr/share/bash-completion/completions/trainplan
  COMP_WORDS=(trainplan fit llama-2-7b --method ql); COMP_CWORD=4; _trainplan; printf "%s" "${COMPREPLY[@]}"')
[ "$value" = "qlora" ] || fail "bash completion of '--method ql' gave '$value'"
[ -f /usr/share/zsh/vendor-completions/_trainplan ] || fail "zsh completion not installed"
[ -f /usr/share/fish/vendor_completions.d/trainplan.fish ] || fail "fish completion not installed"
if command -v zsh >/dev/null; then zsh -n /usr/share/zsh/vendor-completions/_trainplan || fail "zsh completion syntax"; fi
if command -v fish >/dev/null; then fish -n /usr/share/fish/vendor_completions.d/trainplan.fish || fail "fish completion syntax"; fi

if grep -q '^TRAINPLAN_BUILD_GUI:BOOL=ON' "$build/CMakeCache.txt"; then
  [ -x /usr/bin/trainplan-gui ] || fail "trainplan-gui not installed"
  desktop-file-validate /usr/share/applications/trainplan-gui.desktop || fail "desktop file does not validate"
  [ -f /usr/share/icons/hicolor/scalable/apps/trainplan.svg ] || fail "icon not installed"
  man -P cat trainplan-gui >/dev/null 2>&1 || fail "man trainplan-gui does not render"
else
  echo "check-deb: (GUI not built in $build: desktop entry not checked)"
fi

if grep -q '^TRAINPLAN_BUILD_PYTHON:BOOL=ON' "$build/CMakeCache.txt" && [ -n "$(ls "$build"/python/trainplan/_trainplan*.so 2>/dev/null)" ]; then
  out=$(/usr/bin/python3 -c "import trainplan; assert trainplan.__file__.startswith('/usr/lib/python3/dist-packages/'), trainplan.__file__; print(trainplan.fit(model='llama-2-13b', gpu='rtx-4090', method='qlora')['memory']['fits'])")
  [ "$out" = "True" ] || fail "python3 -c 'import trainplan; ...fits' printed '$out'"
fi

echo "check-deb: OK in $(( $(date +%s) - start )) s: installed, ran and removed $(basename "$deb")"
