# Sourced by the *_on_device.sh scripts that run from tests/cuda/carry_hybrid.sh's folder
# (`. "$(dirname "$0")/device_lib.sh" "$1"`): D is that folder, L the logs folder under $OUT
# (/tmp/out unless set; the caller tars it), t LINE prints LINE with the seconds since the start
# and appends it to $OUT/summary.txt, el prints those seconds; unpack_carry unpacks the carried
# system libraries and binaries and points LD_LIBRARY_PATH and a fresh MEMRA_HOME at them.
D=$(readlink -f "${1:-.device/q35}"); OUT=${OUT:-/tmp/out}; mkdir -p $OUT/logs; L=$OUT/logs
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
t() { echo "[$(el)s] $*" | tee -a $OUT/summary.txt; }
unpack_carry() {
  S=/tmp/syslib; mkdir -p $S; tar xJf $D/syslib.tar.xz -C $S; tar xJf $D/bin.tar.xz -C $D
  export LD_LIBRARY_PATH=$S/syslib MEMRA_HOME=$(mktemp -d)
}
