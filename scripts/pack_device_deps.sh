#!/usr/bin/env bash
# Packs the shared libraries a CUDA build of ninfer and test_cuda loads (the Debian packages
# scripts/deps.sh installs, found with ldd) into .carry/deps.tgz under usr/lib/x86_64-linux-gnu,
# for a GPU machine without them (bench/gpu_session.sh unpacks it to /tmp/ninfer_deps and puts
# it on LD_LIBRARY_PATH). The C library, libstdc++, libgcc and the CUDA toolkit's libraries are
# left out: the GPU machine has its own.
#   scripts/pack_device_deps.sh [BUILD_DIR]   (default build-cu: -DNINFER_CUDA=ON)
set -euo pipefail
build=${1:-build-cu}
bins=("$build/bin/ninfer")
[ -x "$build/bin/test_cuda" ] && bins+=("$build/bin/test_cuda")
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "no $b: build it first (cmake -DNINFER_CUDA=ON -B $build)" >&2; exit 1; }; done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dst="$stage/usr/lib/x86_64-linux-gnu"
mkdir -p "$dst"
ldd "${bins[@]}" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
  case $name in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) continue ;;
    libcudart*|libcublas*|libcuda.so*) continue ;;
  esac
  cp -L "$path" "$dst/$name"
done
mkdir -p .carry
tar czf .carry/deps.tgz -C "$stage" usr
echo "wrote .carry/deps.tgz ($(du -h .carry/deps.tgz | cut -f1)): $(ls "$dst" | tr '\n' ' ')"
