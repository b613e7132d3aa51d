// lc0rs hip-emu: AMD's matrix instructions for the kernels of hip/matrix.hip, emulated on HIP-CPU
// under the builtins' own names, inserted after hip/prelude.h when the emulator library is
// built. A matrix instruction reads registers of every lane of its wave: each lane stores its
// A, B and C registers in the block's exchange area, a barrier lets the wave's lanes arrive,
// and each lane then rebuilds A and B from the wave's registers by the instruction's documented
// layout and computes its own elements of D (fp16 products exact in fp32, added in k order to
// C). A second barrier keeps the area until every lane has read it. Layouts and their sources:
// docs/gpu-apis.md §2.6. Where the wave32 WMMA form has both halves of the wave hold A and B
// (lanes 16–31 repeat lanes 0–15), halves that disagree make every element of D NaN, so that a
// kernel that fills only one half fails its tests (the hardware's result is then undefined).

#include <cmath>
#include <limits>

namespace lc0rs_emu_matrix {

// The most threads of a block and registers of one lane (WMMA gfx11: 16 + 16 + 8).
inline constexpr int MAX_THREADS = 1024;
inline constexpr int MAX_AB = 16;
inline constexpr int MAX_C = 8;

struct LaneRegisters {
  float a[MAX_AB];
  float b[MAX_AB];
  float c[MAX_C];
};

// Where lane `lane`'s element `e` of A, B or D sits: A[row][k], B[k][col], D[row][col].
struct Place {
  int row_or_col;
  int k_or_row;
};

// One 16×16×16 instruction: AB registers per lane for A and B, CD for C and D, and the layouts.
template <int AB, int CD, typename AAt, typename BAt, typename DAt>
static void multiply(const float* a, const float* b, const float* c, float* d, AAt a_at, BAt b_at, DAt d_at) {
  // A block runs on one OS thread (its threads are fibers), so this area is the block's.
  thread_local LaneRegisters area[MAX_THREADS];
  const unsigned me = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned lane = me % WARP_SIZE, first = me - lane;
  for (int e = 0; e < AB; ++e) {
    area[me].a[e] = a[e];
    area[me].b[e] = b[e];
  }
  for (int e = 0; e < CD; ++e) area[me].c[e] = c[e];
  __syncthreads();
  float am[16][16], bm[16][16];
  bool seen_a[16][16] = {}, seen_b[16][16] = {};
  bool consistent = true;
  for (unsigned l = 0; l < WARP_SIZE; ++l) {
    for (int e = 0; e < AB; ++e) {
      const Place pa = a_at(l, e), pb = b_at(l, e);
      const float va = area[first + l].a[e], vb = area[first + l].b[e];
      float& ea = am[pa.row_or_col][pa.k_or_row];
      float& eb = bm[pb.k_or_row][pb.row_or_col];
      consistent &= !seen_a[pa.row_or_col][pa.k_or_row] || ea == va;
      consistent &= !seen_b[pb.k_or_row][pb.row_or_col] || eb == vb;
      ea = va;
      eb = vb;
      seen_a[pa.row_or_col][pa.k_or_row] = seen_b[pb.k_or_row][pb.row_or_col] = true;
    }
  }
  for (int e = 0; e < CD; ++e) {
    const Place p = d_at(lane, e);
    float sum = area[me].c[e];
    for (int k = 0; k < 16; ++k) sum = std::fma(am[p.k_or_row][k], bm[k][p.row_or_col], sum);
    d[e] = consistent ? sum : std::numeric_limits<float>::quiet_NaN();
  }
  __syncthreads();
}

template <int N, typename V>
static void to_floats(const V& v, float* out) {
  for (int i = 0; i < N; ++i) out[i] = static_cast<float>(v[i]);
}

template <int N, typename V>
static V from_floats(const float* in) {
  V v;
  for (int i = 0; i < N; ++i) v[i] = in[i];
  return v;
}

// A's element e of lane l is A[l % 16][k], B's is B[k][l % 16]; D's is D[row][l % 16].
inline Place wmma_gfx11_ab(int l, int e) { return {l % 16, e}; }
inline Place wmma_gfx11_d(int l, int e) { return {l % 16, 2 * e + l / 16}; }
inline Place wmma_gfx12_ab(int l, int e) { return {l % 16, 8 * (l / 16) + e}; }
inline Place wmma_gfx12_d(int l, int e) { return {l % 16, 8 * (l / 16) + e}; }
inline Place mfma_16_ab(int l, int e) { return {l % 16, 4 * (l / 16) + e}; }
inline Place mfma_16_d(int l, int e) { return {l % 16, 4 * (l / 16) + e}; }

// The D place functions give {col, row}: swapped into Place's {row_or_col = col, k_or_row = row}.
template <typename V16, typename V8, int AB, Place (*ABAt)(int, int), Place (*DAt)(int, int)>
static V8 instruction(const V16& a, const V16& b, const V8& c) {
  float fa[MAX_AB], fb[MAX_AB], fc[MAX_C], fd[MAX_C];
  to_floats<AB>(a, fa);
  to_floats<AB>(b, fb);
  constexpr int CD = sizeof(V8) / sizeof(float);
  to_floats<CD>(c, fc);
  multiply<AB, CD>(fa, fb, fc, fd, ABAt, ABAt, DAt);
  return from_floats<CD, V8>(fd);
}

}  // namespace lc0rs_emu_matrix

#if defined(HAS_MATRIX_FORM_1)
// RDNA3 ISA, "Wave Matrix Multiply Accumulate": wave32, A and B 16 halves a lane (both halves of
// the wave the same), C and D 8 floats a lane.
static inline mx_float8 __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(mx_half16 a, mx_half16 b, mx_float8 c) {
  using namespace lc0rs_emu_matrix;
  return instruction<mx_half16, mx_float8, 16, wmma_gfx11_ab, wmma_gfx11_d>(a, b, c);
}
#endif
#if defined(HAS_MATRIX_FORM_2)
// RDNA4 ISA: wave32, A and B 8 halves a lane (lanes 16–31 hold k 8–15), C and D 8 floats.
static inline mx_float8 __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(mx_half8 a, mx_half8 b, mx_float8 c) {
  using namespace lc0rs_emu_matrix;
  return instruction<mx_half8, mx_float8, 8, wmma_gfx12_ab, wmma_gfx12_d>(a, b, c);
}
#endif
#if defined(HAS_MATRIX_FORM_3)
// CDNA3 ISA, "Matrix Fused Multiply Add": wave64, A and B 4 halves a lane, C and D 4 floats;
// cbsz, abid and blgp (broadcasts between blocks) are 0 here, the only values lc0rs uses.
static inline mx_float4 __builtin_amdgcn_mfma_f32_16x16x16f16(mx_half4 a, mx_half4 b, mx_float4 c, int cbsz,
                                                               int abid, int blgp) {
  using namespace lc0rs_emu_matrix;
  if (cbsz != 0 || abid != 0 || blgp != 0) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    return mx_float4{nan, nan, nan, nan};
  }
  return instruction<mx_half4, mx_float4, 4, mfma_16_ab, mfma_16_d>(a, b, c);
}
#endif
