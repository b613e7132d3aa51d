#!/usr/bin/env bash
# The matrix-core kernels in an AMDGPU assembly listing (hipcc -S) or code object (hipRTC,
# `lc0rs compile-kernels --code-object`): each must contain the arch's matrix instruction
# (v_wmma_* on gfx11/gfx12, v_mfma_* on CDNA) and use no scratch memory. Prints per kernel: matrix
# instructions, VGPRs (with AGPRs where the arch has them), LDS bytes and waves per SIMD (the
# compiler's for a listing; for a code object from the VGPRs: CDNA 512 a lane in steps of 8, at
# most 8 waves; RDNA3/4 wave32 1536 in steps of 24 on the parts with the larger VGPR file
# (gfx1100, gfx1101, gfx1151, gfx12), 1024 in steps of 16 on the others (gfx1102), at most 16).
#   .ci/matrix-isa.sh LISTING ARCH
#   .ci/matrix-isa.sh --code-object FILE ARCH
set -euo pipefail
if [ "$1" = --code-object ]; then
  code_object=$2
  arch=$3
  # LLVM 15's disassembler (Debian 12) predates gfx942, gfx950 and gfx12: those decode as gfx940
  # and gfx1100, whose matrix opcodes have the same mnemonics.
  case "$arch" in
    gfx94* | gfx950) cpu=gfx940 ;;
    gfx11* | gfx12*) cpu=gfx1100 ;;
    *) cpu=$arch ;;
  esac
  listing=$(mktemp)
  trap 'rm -f "$listing"' EXIT
  llvm-objdump-15 -d --triple=amdgcn-amd-amdhsa --mcpu="$cpu" "$code_object" >"$listing"
  notes=$(llvm-readelf-15 --notes "$code_object")
else
  listing=$1
  arch=$2
  code_object=""
fi
case "$arch" in
  gfx11* | gfx12*) instruction=v_wmma_ ;;
  gfx90a | gfx94* | gfx950) instruction=v_mfma_ ;;
  *) echo "$arch: no matrix form"; exit 1 ;;
esac
kernels="attention_matrix_d16 attention_matrix_d32 attention_matrix_d64 matrix_instruction_check"
status=0
for kernel in $kernels; do
  if [ -n "$code_object" ]; then
    # The disassembly from the kernel's symbol to the next symbol; the metadata entry whose
    # .name is the kernel.
    code=$(awk -v k="<$kernel>:" '$NF == k {on = 1; next} on && /^[0-9a-f]+ <.*>:$/ {exit} on' "$listing")
    entry=$(awk -v k="$kernel" '/^  - \./ {if (found) exit; block = ""} {block = block "\n" $0} $1 == ".name:" && $2 == k {found = 1} END {if (found) print block}' <<<"$notes")
    meta() { awk -v f=".$1:" '$1 == f {print $2; exit}' <<<"$entry"; }
    scratch=$(meta private_segment_fixed_size)
    vgprs=$(meta vgpr_count)
    agprs=$(meta agpr_count)
    vgprs=$((vgprs + ${agprs:-0}))
    lds=$(meta group_segment_fixed_size)
    case "$arch" in
      gfx9*) waves=$((512 / ((vgprs + 7) / 8 * 8))); max=8 ;;
      # LLVM's 1.5x VGPR file (gfx1100, gfx1101, gfx1151) and the thunk's for gfx12.
      gfx1100 | gfx1101 | gfx1151 | gfx12*) waves=$((1536 / ((vgprs + 23) / 24 * 24))); max=16 ;;
      *) waves=$((1024 / ((vgprs + 15) / 16 * 16))); max=16 ;;
    esac
    if [ "$waves" -gt "$max" ]; then waves=$max; fi
  else
    # The function's code (its label to its end label), then its "Kernel info" comment block.
    code=$(awk -v k="$kernel" '$0 == k ":" || $0 ~ "^" k ":[[:space:]]" {on = 1} on && /^\.Lfunc_end/ {exit} on' "$listing")
    info=$(awk -v k="$kernel" '$1 == ".size" && $2 == k "," {on = 1} on && /^; / {print} on && /^[[:space:]]*\.text/ {exit}' "$listing")
    field() { awk -v f="; $1:" 'index($0, f) == 1 {sub(f, ""); sub(/ bytes.*/, ""); gsub(/ /, ""); print; exit}' <<<"$info"; }
    scratch=$(field ScratchSize)
    vgprs=$(field TotalNumVgprs)
    if [ -z "$vgprs" ]; then vgprs=$(field NumVgprs); fi
    lds=$(field LDSByteSize)
    waves=$(field Occupancy)
  fi
  count=$(echo "$code" | grep -cE "^[[:space:]]*(\S+:)?[[:space:]]*$instruction|[[:space:]]$instruction" || true)
  echo "$arch $kernel: $count ${instruction}* instructions, $vgprs VGPRs, LDS $lds bytes, scratch $scratch, $waves waves per SIMD"
  if [ "$count" -eq 0 ] || [ "$scratch" != 0 ]; then
    echo "$arch $kernel: expected ${instruction}* instructions and no scratch"
    status=1
  fi
done
exit $status
