#!/usr/bin/env bash
# Builds lc0 with its plain CUDA backend (cuBLAS + lc0's kernels + cutlass, no cuDNN) from a
# tarball made by scripts/lc0/pack-sources.sh, on a machine without network access: every
# subproject comes from the tarball (meson runs with --wrap-mode=nodownload).
#
# Usage: build.sh TARBALL BUILD_DIR [CUDA_ARCH]
#   CUDA_ARCH: compute capability without the dot, passed as -Dcc_cuda (default 90: H100/H200).
#              `none` builds without any GPU backend (lc0's random/trivial backends only) to check
#              the tarball on a machine without CUDA; such a binary is no use for benchmarks.
#   Unpacks into BUILD_DIR/lc0-src and builds in BUILD_DIR/build (both replaced on every run);
#   the binary is BUILD_DIR/build/lc0.
# Environment:
#   CUDA_HOME          CUDA toolkit root (default: from the nvcc on PATH, else /usr/local/cuda)
#   CUDA_LIBDIRS       comma-separated dirs with libcudart.so and libcublas.so (default: found
#                      under the toolkit root)
#   CUDA_INCLUDEDIRS   comma-separated dirs with cuda_runtime.h and cublas_v2.h (same)
#   NVCC_CCBIN         host compiler for nvcc (-Dnvcc_ccbin)
#   LC0_MESON_ARGS     extra meson setup arguments, e.g. --force-fallback-for=zlib
#   LC0_BLAS           1: also build lc0's CPU backends `blas` (OpenBLAS when found) and `eigen`
#                      (needs Eigen 3 headers), with any CUDA_ARCH, `none` included (default 0)
#   LC0_SOURCE_HOOK    a command run on the unpacked sources before meson setup, with their
#                      directory as its argument (integrations/lc0/build.sh adds lc0rs with it)
#   LC0_EXPECT_BACKENDS comma-separated backend names that `lc0 --help` must list
#   JOBS               ninja's -j (default: nproc)
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d' >&2
  exit 2
fi
tarball=$1
build_root=$2
arch=${3:-90}

step_name=arguments
step() {
  step_name=$1
  echo
  echo "==> [$step_name]"
}
on_exit() {
  local rc=$?
  [ $rc -eq 0 ] || echo "build.sh: FAILED in step [$step_name] (exit $rc)" >&2
}
trap on_exit EXIT
die() {
  echo "build.sh: $*" >&2
  exit 1
}

case ${LC0_BLAS:=0} in
  0 | 1) ;;
  *) die "LC0_BLAS must be 0 or 1, not '$LC0_BLAS'" ;;
esac
case $arch in
  none) ;;
  [1-9][0-9] | [1-9][0-9][0-9]) ;;
  *) die "CUDA_ARCH must be a compute capability such as 90 (or none), not '$arch'" ;;
esac
[ -f "$tarball" ] || die "no tarball at $tarball"
tarball=$(realpath "$tarball")
mkdir -p "$build_root"
build_root=$(realpath "$build_root")
src=$build_root/lc0-src
bld=$build_root/build
jobs=${JOBS:-$(nproc)}

# ------------------------------------------------------------------------------------------
step tools
if command -v meson >/dev/null; then
  meson=(meson)
elif python3 -c 'import mesonbuild' 2>/dev/null; then
  meson=(python3 -m mesonbuild.mesonmain)
else
  die "meson not found (neither on PATH nor as a python3 module)"
fi
if [ -z "${NINJA:-}" ]; then
  if command -v ninja >/dev/null; then
    NINJA=$(command -v ninja)
  elif ninja_bin=$(python3 -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))' 2>/dev/null) &&
    [ -x "$ninja_bin" ]; then
    NINJA=$ninja_bin
  else
    die "ninja not found (neither on PATH nor as a python3 module)"
  fi
fi
export NINJA # meson setup looks for ninja through $NINJA first
for tool in python3 tar c++ cc; do
  command -v "$tool" >/dev/null || die "$tool not found"
done
echo "meson $("${meson[@]}" --version) (${meson[*]}), ninja $("$NINJA" --version) ($NINJA)"
echo "c++: $(c++ --version | head -n1)"
echo "python3: $(python3 --version 2>&1)"

# ------------------------------------------------------------------------------------------
cuda_opts=()
if [ "$arch" != none ]; then
  step cuda
  if [ -n "${CUDA_HOME:-}" ]; then
    nvcc=$CUDA_HOME/bin/nvcc
  elif command -v nvcc >/dev/null; then
    nvcc=$(command -v nvcc)
  else
    nvcc=
    for d in /usr/local/cuda /opt/cuda; do
      [ -x "$d/bin/nvcc" ] && nvcc=$d/bin/nvcc && break
    done
  fi
  [ -n "$nvcc" ] && [ -x "$nvcc" ] || die "nvcc not found (set CUDA_HOME or put nvcc on PATH)"
  nvcc=$(realpath "$nvcc")
  cuda_root=${CUDA_HOME:-$(dirname "$(dirname "$nvcc")")}
  PATH="$(dirname "$nvcc"):$PATH" # lc0's meson.build looks for nvcc on PATH too
  export PATH
  case $(uname -m) in
    x86_64) target=x86_64-linux ;;
    aarch64) target=sbsa-linux ;;
    *) target=$(uname -m)-linux ;;
  esac
  # first_with DIRS FILE...: the comma-separated DIRS (from the list) holding all FILEs.
  first_with() {
    local dirs=$1 d f ok found=
    shift
    for d in ${dirs//,/ }; do
      ok=1
      for f in "$@"; do [ -e "$d/$f" ] || ok=0; done
      [ $ok = 1 ] && found=${found:+$found,}$d
    done
    echo "$found"
  }
  libdirs=${CUDA_LIBDIRS:-$(first_with "$cuda_root/lib64,$cuda_root/lib,$cuda_root/targets/$target/lib,/usr/lib/$(uname -m)-linux-gnu" libcudart.so libcublas.so)}
  incdirs=${CUDA_INCLUDEDIRS:-$(first_with "$cuda_root/include,$cuda_root/targets/$target/include,/usr/include" cuda_runtime.h cublas_v2.h)}
  [ -n "$libdirs" ] || die "libcudart.so and libcublas.so not found under $cuda_root (set CUDA_LIBDIRS)"
  [ -n "$incdirs" ] || die "cuda_runtime.h and cublas_v2.h not found under $cuda_root (set CUDA_INCLUDEDIRS)"
  [ -n "$(first_with "$libdirs" libcudart.so libcublas.so)" ] || die "CUDA_LIBDIRS ($libdirs) lacks libcudart.so or libcublas.so"
  "$nvcc" --list-gpu-code 2>/dev/null | grep -qx "sm_$arch" ||
    die "this nvcc cannot build sm_$arch (nvcc --list-gpu-code: $("$nvcc" --list-gpu-code 2>/dev/null | tr '\n' ' '))"
  echo "nvcc: $nvcc ($("$nvcc" --version | tail -n 2 | head -n 1))"
  echo "CUDA libraries: $libdirs"
  echo "CUDA headers:   $incdirs"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null || true
  fi
  cuda_opts=(
    -Dbuild_backends=true
    -Dplain_cuda=true -Dcudnn=false -Dcutlass=true -Dnvcc=true
    -Dcc_cuda="$arch"
    -Dcudnn_libdirs="$libdirs" -Dcudnn_include="$incdirs"
  )
  [ -z "${NVCC_CCBIN:-}" ] || cuda_opts+=(-Dnvcc_ccbin="$NVCC_CCBIN")
else
  echo
  if [ "$LC0_BLAS" = 1 ]; then
    echo "CUDA_ARCH=none: no GPU backend; lc0's CPU backends (blas, eigen) only."
    cuda_opts=(-Dbuild_backends=true -Dplain_cuda=false -Dcudnn=false -Dcutlass=false -Dnvcc=false)
  else
    echo "CUDA_ARCH=none: no GPU backend; this only checks that the sources configure and compile."
    cuda_opts=(-Dbuild_backends=false -Dplain_cuda=false -Dcudnn=false -Dcutlass=false -Dnvcc=false)
  fi
fi
if [ "$LC0_BLAS" = 1 ]; then
  blas_opts=(-Dblas=true -Dopenblas=true)
else
  blas_opts=(-Dblas=false -Dopenblas=false)
fi

# ------------------------------------------------------------------------------------------
step unpack
rm -rf "$src" "$bld"
tar -xf "$tarball" -C "$build_root"
[ -f "$src/meson.build" ] || die "$tarball did not unpack to $src"
cat "$src/LC0_SOURCES.txt"
if [ -n "${LC0_SOURCE_HOOK:-}" ]; then
  step "source hook"
  echo "$LC0_SOURCE_HOOK $src"
  # shellcheck disable=SC2086 # the hook may be a command with arguments
  $LC0_SOURCE_HOOK "$src"
fi

# ------------------------------------------------------------------------------------------
step "meson setup"
# Keep git from finding a repository above the unpacked sources (lc0 would take its revision
# for the build identifier; the tarball's meson.build already names lc0's commit).
export GIT_CEILING_DIRECTORIES=$build_root
unset GIT_DIR GIT_WORK_TREE
opts=(
  --buildtype=release
  --wrap-mode=nodownload
  --force-fallback-for=abseil-cpp
  -Ddefault_library=static
  -Db_lto=false
  -Dnative_arch=true
  "${cuda_opts[@]}"
  "${blas_opts[@]}" -Dmkl=false -Ddnnl=false -Daccelerate=false -Dispc=false
  -Donednn=false -Dopencl=false -Ddx=false -Dtensorflow=false -Donnx=false -Dxla=false
  -Dsycl=off -Dmetal=disabled
  -Dgtest=false -Drescorer=false -Dpython_bindings=false -Dtrace_library=off -Dembed=false
)
# shellcheck disable=SC2206 # LC0_MESON_ARGS is split on spaces on purpose
extra=(${LC0_MESON_ARGS:-})
echo "meson setup $bld ${opts[*]} ${extra[*]}"
(cd "$src" && "${meson[@]}" setup "$bld" "${opts[@]}" ${extra[@]+"${extra[@]}"})

# ------------------------------------------------------------------------------------------
step "check configuration"
if [ "$arch" != none ]; then
  # lc0 leaves a backend out silently when it cannot find its libraries: insist on CUDA.
  grep -q 'network_cuda\.cc' "$bld/build.ninja" ||
    die "meson did not enable the CUDA backend (see $bld/meson-logs/meson-log.txt)"
  if [ "$arch" -ge 80 ]; then
    grep -q 'cutlass_kernels\.cu' "$bld/build.ninja" ||
      die "meson did not enable cutlass for sm_$arch (see $bld/meson-logs/meson-log.txt)"
  fi
  echo "CUDA backend: yes; cutlass: $(grep -q 'cutlass_kernels\.cu' "$bld/build.ninja" && echo yes || echo no)"
fi
if [ "$LC0_BLAS" = 1 ]; then
  grep -q 'network_blas\.cc' "$bld/build.ninja" ||
    die "meson did not enable the BLAS/Eigen backend (see $bld/meson-logs/meson-log.txt)"
  echo "BLAS backend: yes ($(grep -q -- '-DUSE_OPENBLAS' "$bld/build.ninja" && echo OpenBLAS and Eigen || echo Eigen only))"
fi
grep '^#define BUILD_IDENTIFIER' "$bld/build_id.h" || true

# ------------------------------------------------------------------------------------------
step "compile"
"$NINJA" -C "$bld" -j "$jobs"

# ------------------------------------------------------------------------------------------
step "smoke test"
bin=$bld/lc0
[ -x "$bin" ] || die "no binary at $bin"
if ldd "$bin" | grep -q 'not found'; then
  echo "note: without LD_LIBRARY_PATH some libraries are unresolved:"
  ldd "$bin" | grep 'not found'
fi
run_env=()
[ "$arch" = none ] || run_env=(env "LD_LIBRARY_PATH=${libdirs//,/:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
help=$build_root/lc0-help.txt
${run_env[@]+"${run_env[@]}"} "$bin" --help >"$help" 2>&1 || die "$bin --help failed: $(tail -n 5 "$help")"
head -n 20 "$help"
backends=$(grep -A 2 -e '--backend=CHOICE' "$help" | sed -n 's/.*VALUES: \([^]]*\)\].*/\1/p')
echo "backends: $backends"
if [ "$arch" != none ]; then
  case ",$backends," in
    *,cuda-fp16,*) ;;
    *) die "$bin --help lists no cuda-fp16 backend" ;;
  esac
fi
expected=${LC0_EXPECT_BACKENDS:-}
for want in ${expected//,/ }; do
  case ",$backends," in
    *,"$want",*) ;;
    *) die "$bin --help lists no $want backend" ;;
  esac
done
echo
echo "lc0 binary: $bin"
