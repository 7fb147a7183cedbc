#!/usr/bin/env bash
# Installs the Debian packages trainplan builds with, only those missing.
# scripts/check-deps.sh (run by test.sh) checks that every package providing a
# CMake config file the build found is installed by this list.
set -euo pipefail
pkgs=(cmake ninja-build g++ libeigen3-dev libcli11-dev libtomlplusplus-dev libfmt-dev nlohmann-json3-dev catch2)
# The Python module (pybind11 for Debian's python3) and the man page generator.
if [ "${TRAINPLAN_PYTHON:-1}" = 1 ]; then pkgs+=(python3 python3-dev pybind11-dev); fi
# Fuzzing and sanitizers for the test command (clang brings libFuzzer); the .deb
# check: dpkg-shlibdeps and file for CPack, man and desktop-file-validate.
if [ "${TRAINPLAN_DEV:-1}" = 1 ]; then pkgs+=(clang libclang-rt-14-dev dpkg-dev file man-db desktop-file-utils); fi
if [ "${TRAINPLAN_GUI:-1}" = 1 ]; then pkgs+=(qt6-base-dev libqt6opengl6-dev qt6-charts-dev qt6-svg-dev); fi
if [ "${1:-}" = "--list" ]; then printf '%s\n' "${pkgs[@]}"; exit 0; fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
