# CI for the emulated AMD GPU (backend hip-emu), sourced by .ci/run before `cargo test`: installs
# what the emulator needs (g++, TBB), checks that HIP-CPU is where lc0rs looks for it (beside the
# checkout, or $LC0RS_HIP_CPU), makes the emulator's tests in `cargo test` required, and runs
# `lc0rs selftest -b hip-emu` at both wave sizes on the bundled nets (the attention on emulated
# matrix cores) and the tiny-se tower.

echo "== hip-emu: the rocm-fp16 executor on an emulated AMD GPU (HIP-CPU)"
have_tbb() { [ -f /usr/include/oneapi/tbb.h ] || [ -f /usr/include/tbb/tbb.h ]; }
if ! command -v g++ >/dev/null 2>&1 || ! have_tbb; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ libtbb-dev >/dev/null
fi
hip_cpu="${LC0RS_HIP_CPU:-$PWD/../shared/third_party/HIP-CPU}"
if [ ! -f "$hip_cpu/include/hip/hip_runtime.h" ]; then
  echo "HIP-CPU not found at $hip_cpu (expected shared/third_party/HIP-CPU beside the checkout, or \$LC0RS_HIP_CPU)"
  exit 1
fi
export LC0RS_HIP_CPU="$hip_cpu"
# From here on, a test that cannot build or open the emulator fails instead of skipping.
export LC0RS_REQUIRE_HIP_EMU=1
cargo build --quiet
target/debug/lc0rs devices | sed -n '/^hip-emu/,/^CUDA/p'
# The attention on emulated matrix cores: wave64 builds emulate gfx942 (MFMA), wave32 gfx1100
# (WMMA); the portable attention runs in `cargo test` (gpu_emu, attention=portable).
for wave in 64 32; do
  for net in bundled:tiny bundled:tiny-dense; do
    echo "-- selftest -b hip-emu -o wave=$wave,attention=matrix -w $net"
    target/debug/lc0rs selftest -b hip-emu -o "wave=$wave,attention=matrix" -w "$net" --positions 16 --batch 1,7,16
  done
done
# A residual tower (SE blocks, convolution policy, WDL, moves left), generated into the cache.
for wave in 64 32; do
  echo "-- selftest -b hip-emu -o wave=$wave -w preset:tiny-se"
  target/debug/lc0rs selftest -b hip-emu -o "wave=$wave" -w preset:tiny-se --positions 16 --batch 1,7,16
done
