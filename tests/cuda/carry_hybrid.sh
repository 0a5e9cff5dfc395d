#!/usr/bin/env bash
# Packs what tests/cuda/hybrid_on_device.sh runs on the GPU machine (#39: the Qwen3.5 hybrid
# against llama.cpp on the same GGUFs): memra-kernel-check, memra-bench and the engine suites
# with the family's CUDA instances, the backend, kernels and plugins, the shared libraries they
# load, and ../shared/anchors (llama.cpp's tree and scripts). About 26 MB: carry the destination.
# Usage: [BINS="memra-bench ..."] tests/cuda/carry_hybrid.sh <build-dir configured with -DMEMRA_CUDA=ON> [<dest>=.device/q35]
# (BINS: fewer binaries when the tracked tree leaves less than the carry needs under 64 MiB)
set -eu
B=${1:?build dir}
D=${2:-.device/q35}
A=${MEMRA_ANCHORS_DIR:-$(dirname "$0")/../../../shared/anchors}
BINS=${BINS:-"memra-kernel-check memra-bench memra-gen engine_fixture_test engine_recurrent_state_test engine_mtp_test engine_speculative_scheduler_test"}
cmake --build "$B" -j2 --target memra_backend_cuda memra_kernel_modules $BINS memra_family_qwen3next memra_family_llama
rm -rf "$D" && mkdir -p "$D/bin" "$D/syslib" "$D/anchors"
for b in $BINS; do cp "$B/bin/$b" "$D/bin/"; done
cp -r "$B/lib" "$D/lib"
strip "$D"/bin/* "$D"/lib/memra/*.so "$D"/lib/memra/plugins/*.so "$D"/lib/memra/test-plugins/*.so 2>/dev/null || true
for b in "$D"/bin/*; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u |
  grep -E "libicu|libpcre|libPoco|libsqlite3|libprometheus|libcrypto|libssl|libexpat|libz\.so" |
  while read -r lib; do cp -L "$lib" "$D/syslib/"; done
tar cJf "$D/syslib.tar.xz" -C "$D" syslib && rm -rf "$D/syslib"
tar cf - -C "$D" bin lib | xz -9e -T2 > "$D/bin.tar.xz" && rm -rf "$D/bin" "$D/lib"
cp "$A"/* "$D/anchors/"
du -sh "$D"
