#!/usr/bin/env bash
# The check that keeps scripts/deps.sh from drifting: every Debian package that
# provides a CMake package config the configured build found (the <Name>_DIR
# entries of CMakeCache.txt, Qt's transitive ones included) and the Python headers
# must be installed by deps.sh -- listed there, or a hard Depends of a listed
# package (a Recommends is not installed: deps.sh uses --no-install-recommends).
# usage: scripts/check-deps.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cache="$build/CMakeCache.txt"
[ -f "$cache" ] || { echo "check-deps: $cache not found (configure first)" >&2; exit 2; }

mapfile -t listed < <(TRAINPLAN_DEV=1 TRAINPLAN_GUI=1 TRAINPLAN_PYTHON=1 ./scripts/deps.sh --list)
# What installing the list brings: the Depends/Pre-Depends closure over the installed
# packages (dpkg's own records, so no apt lists are needed), no Recommends.
mapfile -t closure < <(dpkg-query -W -f='${Package}\t${Depends}, ${Pre-Depends}\n' | awk -F'\t' -v roots="${listed[*]}" '
  { n = split($2, deps, /[,|]/); d[$1] = ""
    for (i = 1; i <= n; i++) { x = deps[i]; gsub(/\(.*\)|:any|:native| /, "", x); if (x != "") d[$1] = d[$1] " " x } }
  END { m = split(roots, q, " "); for (i = 1; i <= m; i++) seen[q[i]] = 1
        while (m > 0) { p = q[m--]; k = split(d[p], ds, " ")
          for (j = 1; j <= k; j++) if (!(ds[j] in seen) && (ds[j] in d)) { seen[ds[j]] = 1; q[++m] = ds[j] } }
        for (p in seen) print p }')
declare -A have=()
for p in "${listed[@]}" "${closure[@]}"; do have[$p]=1; done

# Files whose packages the build needs.
files=()
while IFS= read -r dir; do
  for f in "$dir"/*Config.cmake "$dir"/*-config.cmake; do [ -f "$f" ] && files+=("$f") && break; done
done < <(grep -E '^[A-Za-z0-9_]+_DIR:(PATH|STRING|INTERNAL)=/usr/' "$cache" | sed 's/^[^=]*=//' | sort -u)
py_inc=$(grep -E '^_?Python3_INCLUDE_DIR:[A-Z]+=' "$cache" | head -1 | sed 's/^[^=]*=//' || true)
[ -n "$py_inc" ] && [ -f "$py_inc/Python.h" ] && files+=("$py_inc/Python.h")
[ ${#files[@]} -gt 0 ] || { echo "check-deps: no package configs found in $cache" >&2; exit 2; }

fail=0
declare -A seen=()
for f in "${files[@]}"; do
  real=$(readlink -f "$f")
  owner=$(dpkg -S "$real" 2>/dev/null | head -1 | sed 's/:.*//; s/, .*//') || true
  [ -z "$owner" ] && owner=$(dpkg -S "$f" 2>/dev/null | head -1 | sed 's/:.*//; s/, .*//') || true
  if [ -z "$owner" ]; then
    echo "check-deps: $f belongs to no Debian package (installed by hand?)" >&2; fail=1; continue
  fi
  [ -n "${seen[$owner]:-}" ] && continue
  seen[$owner]=1
  if [ -z "${have[$owner]:-}" ]; then
    echo "check-deps: $owner (provides $f) is not installed by scripts/deps.sh: add it to the list" >&2
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "check-deps: ${#seen[@]} packages providing the build's CMake configs are all installed by scripts/deps.sh"
exit $fail
