#!/usr/bin/env bash
# Installs what vspyre needs to build and test, from Debian packages (bookworm or trixie).
# Safe to run again: apt-get skips what is already installed.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential pkg-config ninja-build
      libsystemc-dev libyaml-cpp-dev catch2 libbenchmark-dev
      libprotobuf-dev protobuf-compiler nlohmann-json3-dev libboost-dev libopenblas-dev
      clang libclang-rt-dev)
# Debian 12 names the clang runtime after its version.
if ! apt-cache show libclang-rt-dev >/dev/null 2>&1; then
  pkgs=("${pkgs[@]/libclang-rt-dev/libclang-rt-14-dev}")
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# CMake >= 3.21 for presets: Debian 12 ships 3.25, fine; use pip's if the system has none.
if ! command -v cmake >/dev/null 2>&1; then
  apt-get install -y -qq cmake >/dev/null
fi
# Python side (vspyre sweep and its tests): pip skips what is already installed.
if command -v python3 >/dev/null 2>&1; then
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check \
    -r "$(dirname "${BASH_SOURCE[0]}")/requirements.txt"
fi
