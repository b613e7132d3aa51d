#!/usr/bin/env bash
# The matrix-core kernels in an AMDGPU assembly listing (hipcc -S): each must contain the arch's
# matrix instruction (v_wmma_* on gfx11/gfx12, v_mfma_* on CDNA) and use no scratch memory. Prints
# per kernel: matrix instructions, VGPRs (with AGPRs where the arch has them), LDS bytes and the
# compiler's waves per SIMD.
#   .ci/matrix-isa.sh LISTING ARCH
set -euo pipefail
listing=$1
arch=$2
case "$arch" in
  gfx11* | gfx12*) instruction=v_wmma_ ;;
  gfx90a | gfx94* | gfx950) instruction=v_mfma_ ;;
  *) echo "$arch: no matrix form"; exit 1 ;;
esac
kernels="attention_matrix_d16 attention_matrix_d32 attention_matrix_d64 matrix_instruction_check"
status=0
for kernel in $kernels; do
  # The function's code (its label to its end label), then its "Kernel info" comment block.
  code=$(awk -v k="$kernel" '$0 == k ":" || $0 ~ "^" k ":[[:space:]]" {on = 1} on && /^\.Lfunc_end/ {exit} on' "$listing")
  info=$(awk -v k="$kernel" '/^\.Lfunc_end/ {last = $0} $1 == ".size" && $2 == k "," {on = 1} on && /^; / {print} on && /^[[:space:]]*\.text/ {exit}' "$listing")
  count=$(echo "$code" | grep -c "^[[:space:]]*$instruction" || true)
  field() { echo "$info" | awk -v f="; $1:" 'index($0, f) == 1 {sub(f, ""); sub(/ bytes.*/, ""); gsub(/ /, ""); print; exit}'; }
  scratch=$(field ScratchSize)
  vgprs=$(field TotalNumVgprs)
  if [ -z "$vgprs" ]; then vgprs=$(field NumVgprs); fi
  lds=$(field LDSByteSize)
  waves=$(field Occupancy)
  echo "$arch $kernel: $count ${instruction}* instructions, $vgprs VGPRs, LDS $lds bytes, scratch $scratch, $waves waves per SIMD"
  if [ "$count" -eq 0 ] || [ "$scratch" != 0 ]; then
    echo "$arch $kernel: expected ${instruction}* instructions and no scratch"
    status=1
  fi
done
exit $status
