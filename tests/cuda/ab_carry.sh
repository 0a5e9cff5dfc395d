#!/usr/bin/env bash
# A same-machine A/B of the CUDA backend for tests/cuda/ab_bench_on_device.sh: this
# tree's memra-bench, plugins, backend and kernel modules as "new", and the backend and
# kernel modules of <rev> as "old" (kernels/ and host/backend/cuda/ restored from <rev>
# in the working tree, built, then restored to HEAD and rebuilt). Machines differ call to
# call by 5-8 %, so two versions are compared only inside one call (docs/PERFORMANCE.md,
# "How to measure").
# Needs kernels/ and host/backend/cuda/ without uncommitted changes; ~20 MB.
# Usage: [AB_PATHS="kernels host/backend/cuda"] [EXTRA_BINS="memra-kernel-check ..."]
#        tests/cuda/ab_carry.sh <build-dir configured with -DMEMRA_CUDA=ON> <rev> [<dest>=.device/ab]
# AB_PATHS: the paths restored from <rev> for the old side (the old backend must build
# against this tree's SDK headers); EXTRA_BINS: more of this tree's binaries for new/bin;
# OLD_LIB: instead, the lib/memra of a build of <rev> elsewhere (e.g. a git worktree at
# <rev> built with `ninja memra_backend_cuda memra_kernel_modules`), whose backend and
# kernels become the old side as they are (no restore, no rebuild here); AB_NO_BUILD=1:
# take <build-dir>'s binaries as they are (e.g. while a test suite runs from it).
set -eu
B=${1:?build dir}
REV=${2:?revision of the old backend}
D=${3:-.device/ab}
PATHS=${AB_PATHS:-"kernels host/backend/cuda"}
EXTRA_BINS=${EXTRA_BINS:-}
OLD_LIB=${OLD_LIB:-}
[ -n "$OLD_LIB" ] || git diff --quiet HEAD -- $PATHS || { echo "ab_carry: commit or stash the changes under $PATHS first" >&2; exit 2; }
git rev-parse --verify -q "$REV^{commit}" > /dev/null || { echo "ab_carry: no revision $REV" >&2; exit 2; }
TARGETS="memra_backend_cuda memra_kernel_modules"
[ -n "${AB_NO_BUILD:-}" ] || cmake --build "$B" -j2 --target memra-bench $EXTRA_BINS $TARGETS memra_family_llama memra_quant_float memra_quant_q8_0 memra_quant_q4_0 \
  memra_quant_q4_k memra_quant_q5_k memra_quant_q6_k memra_quant_iq4_xs memra_quant_fp8
rm -rf "$D" && mkdir -p "$D/new/bin" "$D/new/lib" "$D/old/lib/memra" "$D/syslib"
cp "$B/bin/memra-bench" "$D/new/bin/" && cp -r "$B/lib/memra" "$D/new/lib/"
for b in $EXTRA_BINS; do cp "$B/bin/$b" "$D/new/bin/"; done
rm -rf "$D/new/lib/memra/test-plugins"
if [ -n "$OLD_LIB" ]; then
  cp "$OLD_LIB/libmemra-backend-cuda.so" "$D/old/lib/memra/" && cp -r "$OLD_LIB/kernels" "$D/old/lib/memra/"
else
  restore() { git restore --source=HEAD --worktree -- $PATHS; }
  trap restore EXIT
  # (git restore also removes the files REV lacks, and leaves the index alone)
  git restore --source="$REV" --worktree -- $PATHS
  cmake --build "$B" -j2 --target $TARGETS
  cp "$B/lib/memra/libmemra-backend-cuda.so" "$D/old/lib/memra/" && cp -r "$B/lib/memra/kernels" "$D/old/lib/memra/"
  restore && trap - EXIT
  cmake --build "$B" -j2 --target $TARGETS  # the build dir matches the tree again
fi
strip "$D"/new/bin/* "$D"/new/lib/memra/*.so "$D"/new/lib/memra/plugins/*.so "$D"/old/lib/memra/*.so
for b in "$D"/new/bin/*; do ldd "$b"; done | awk '/=> \// {print $3}' | grep -E "libicu|libpcre|libPoco|libsqlite3|libprometheus|libcrypto|libssl|libexpat|libz\.so" |
  sort -u | while read -r lib; do cp -L "$lib" "$D/syslib/"; done
git rev-parse --short HEAD > "$D/new/REV" && git rev-parse --short "$REV" > "$D/old/REV"
tar cJf "$D/ab.tar.xz" -C "$D" new old syslib && rm -rf "$D/new" "$D/old" "$D/syslib"
cp "$(dirname "$0")/ab_bench_on_device.sh" "$(dirname "$0")/scheme_plugins_on_device.sh" "$D/"
du -sh "$D"
