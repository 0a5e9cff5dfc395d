#!/usr/bin/env bash
# Builds and copies what tests/cuda/int8_gemv_on_device.sh runs: the stripped
# memra-kernel-check, the CUDA backend and every kernel module (~10 MB).
# Usage: tests/cuda/int8_gemv_carry.sh <build-dir configured with -DMEMRA_CUDA=ON> [<dest>=.device/q8]
set -eu
B=${1:?build dir}
D=${2:-.device/q8}
cmake --build "$B" -j2 --target memra-kernel-check memra_backend_cuda memra_kernel_modules
rm -rf "$D"
mkdir -p "$D/bin" "$D/lib/memra/kernels"
cp "$B/bin/memra-kernel-check" "$D/bin/"
cp "$B/lib/memra/libmemra-backend-cuda.so" "$D/lib/memra/"
cp "$B"/lib/memra/kernels/*.fatbin "$D/lib/memra/kernels/"
strip "$D/bin/memra-kernel-check" "$D/lib/memra/libmemra-backend-cuda.so"
cp "$(dirname "$0")/int8_gemv_on_device.sh" "$D/"
chmod -R u+w "$D"
du -sh "$D"
