// lc0rs kernels on AMD matrix cores (WMMA on RDNA3/3.5/4, MFMA on CDNA2/3/4): the attention, and a
// check that runs one matrix instruction on register contents the caller lays out. Compiled only
// where hip/prelude.h defines LC0RS_MATRIX_FORM (those archs, and the emulator); every other
// target runs the portable attention.
#if defined(GPU_HIP) && defined(LC0RS_MATRIX_FORM)

  // One 16×16×16 product of a wave, by form: lane l's element e of A is A[l % 16][mx_k(l, e)],
  // of B (given as Bᵀ rows) B[mx_k(l, e)][l % 16], of the accumulator D[mx_row(l, e)][l % 16].
  #if LC0RS_MATRIX_FORM == MATRIX_WMMA_GFX11
    typedef mx_half16 mx_ab;
    typedef mx_float8 mx_acc;
    #define MX_AB 16
    #define MX_ACC 8
static __device__ __forceinline__ int mx_k(int lane, int e) { return e; }
static __device__ __forceinline__ int mx_row(int lane, int e) { return 2 * e + lane / 16; }
static __device__ __forceinline__ mx_acc mx_mma(mx_ab a, mx_ab b, mx_acc c) {
  return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
}
  #elif LC0RS_MATRIX_FORM == MATRIX_WMMA_GFX12
    typedef mx_half8 mx_ab;
    typedef mx_float8 mx_acc;
    #define MX_AB 8
    #define MX_ACC 8
static __device__ __forceinline__ int mx_k(int lane, int e) { return 8 * ((lane / 16) % 2) + e; }
static __device__ __forceinline__ int mx_row(int lane, int e) { return 8 * ((lane / 16) % 2) + e; }
static __device__ __forceinline__ mx_acc mx_mma(mx_ab a, mx_ab b, mx_acc c) {
  return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
}
  #else
    typedef mx_half4 mx_ab;
    typedef mx_float4 mx_acc;
    #define MX_AB 4
    #define MX_ACC 4
static __device__ __forceinline__ int mx_k(int lane, int e) { return 4 * ((lane / 16) % 4) + e; }
static __device__ __forceinline__ int mx_row(int lane, int e) { return 4 * ((lane / 16) % 4) + e; }
static __device__ __forceinline__ mx_acc mx_mma(mx_ab a, mx_ab b, mx_acc c) {
  return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
}
  #endif

// acc += A·B for a 16×16 tile of A (row-major at `a`, row stride `lda` halves) and of B given
// as Bᵀ (row-major at `bt`: row n holds column n of B, stride `ldb`). Each lane's elements of a
// row are consecutive in k, so they load as one 8–32-byte read.
static __device__ __forceinline__ mx_acc mx_tile(mx_acc acc, const mx_half* a, int lda, const mx_half* bt,
                                                 int ldb, int lane) {
  mx_ab fa, fb;
  #pragma unroll
  for (int e = 0; e < MX_AB; ++e) {
    fa[e] = a[(lane % 16) * lda + mx_k(lane, e)];
    fb[e] = bt[(lane % 16) * ldb + mx_k(lane, e)];
  }
  return mx_mma(fa, fb, acc);
}

// Shared memory of the matrix attention (bytes): Q and K as fp16 rows, which the fp32 scores
// then overwrite; Vᵀ and the probabilities P as fp16 rows. Row strides are 16-byte multiples
// padded off multiples of 128 bytes, so that the 16 rows a fragment load reads start in
// different banks.
  #define MATRIX_ATTENTION_THREADS (4 * WARP_SIZE)
template <int DEPTH>
struct MatrixAttentionLayout {
  static constexpr int LD = DEPTH + 8;  // halves: Q and K rows
  static constexpr int LDT = 64 + 8;    // halves: Vᵀ and P rows
  static constexpr int LDS = 64 + 4;    // floats: score rows
  static constexpr int QK = 2 * 64 * LD * 2;
  static constexpr int SCORES = 64 * LDS * 4;
  static constexpr int FIRST = QK > SCORES ? QK : SCORES;
  static constexpr int VT = FIRST;
  static constexpr int P = VT + DEPTH * LDT * 2;
  static constexpr int BYTES = P + 64 * LDT * 2;
};

// Q, K (with their biases) into fp16 rows and V (without: it is added to the output) into
// fp16 Vᵀ; neighbouring threads take neighbouring 16-byte chunks of a row.
template <int DEPTH>
static __device__ __forceinline__ void matrix_attention_load(unsigned char* smem, const __half* qkv,
                                                             const __half* qkv_bias, long row0, int d_model,
                                                             int h) {
  using L = MatrixAttentionLayout<DEPTH>;
  mx_half* q = (mx_half*)smem;
  mx_half* k = q + 64 * L::LD;
  mx_half* vt = (mx_half*)(smem + L::VT);
  constexpr int CHUNKS = DEPTH / 8;
  for (int i = threadIdx.x; i < 64 * CHUNKS; i += MATRIX_ATTENTION_THREADS) {
    const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
    const long col = h * DEPTH + c;
    const __half* src = qkv + (row0 + r) * 3 * d_model + col;
    float qv[8], kv[8], vv[8];
    load8(src, qv);
    load8_plus_bias(src + d_model, qkv_bias, d_model + col, kv);
    load8(src + 2 * d_model, vv);
    float qb[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (qkv_bias) load8(qkv_bias + col, qb);
    #pragma unroll
    for (int e = 0; e < 8; ++e) {
      q[r * L::LD + c + e] = (mx_half)(qv[e] + qb[e]);
      k[r * L::LD + c + e] = (mx_half)kv[e];
      vt[(c + e) * L::LDT + r] = (mx_half)vv[e];
    }
  }
}

// Softmax of the wave's 16 score rows (already scaled to base 2 and biased) into fp16 P rows:
// WARP_SIZE / 16 lanes per row, their partial maxima and sums combined by shuffles.
static __device__ __forceinline__ void matrix_attention_softmax(const float* s, int lds, mx_half* p, int ldp,
                                                                int q0, int lane) {
  constexpr int PARTS = WARP_SIZE / 16;
  const int row = q0 + lane / PARTS, part = lane % PARTS;
  constexpr int COLS = 64 / PARTS;  // a lane's columns: part, part + PARTS, …
  float x[COLS];
  float mx = -3.0e38f;
  #pragma unroll
  for (int i = 0; i < COLS; ++i) {
    x[i] = s[row * lds + part + i * PARTS];
    mx = fmaxf(mx, x[i]);
  }
  #pragma unroll
  for (int m = 1; m < PARTS; m *= 2) mx = fmaxf(mx, SHFL_XOR(mx, m));
  float sum = 0.f;
  #pragma unroll
  for (int i = 0; i < COLS; ++i) {
    x[i] = exp2_approx(x[i] - mx);
    sum += x[i];
  }
  #pragma unroll
  for (int m = 1; m < PARTS; m *= 2) sum += SHFL_XOR(sum, m);
  const float inv = rcp_approx(sum);  // sum ≥ 1: the row's maximum contributes 2⁰
  #pragma unroll
  for (int i = 0; i < COLS; ++i) p[row * ldp + part + i * PARTS] = (mx_half)(x[i] * inv);
}

// The attention of the portable kernel (same arguments, same result) on matrix cores: one block of
// four waves per (head, position), wave w taking queries 16w … 16w + 15. S = Q·Kᵀ in four 16×16
// tiles per wave; the scores, scaled (in base 2) and with the smolgen bias, go through shared
// memory (over Q and K) to a softmax of WARP_SIZE / 16 lanes per row; P, rounded to fp16 as lc0's
// fp16 path does, and Vᵀ feed O = P·V, to which V's bias is added (each row of P sums to 1).
template <int DEPTH>
static __device__ void matrix_attention_body(const __half* __restrict__ qkv, const __half* __restrict__ qkv_bias,
                                             const __half* __restrict__ bias, __half* __restrict__ ctx, int heads) {
  using L = MatrixAttentionLayout<DEPTH>;
  __shared__ __align__(16) unsigned char smem[L::BYTES];
  const int h = blockIdx.x, b = blockIdx.y, t = threadIdx.x;
  const int lane = t % WARP_SIZE, q0 = (t / WARP_SIZE) * 16;
  const int d_model = heads * DEPTH;
  const long row0 = (long)b * 64;
  matrix_attention_load<DEPTH>(smem, qkv, qkv_bias, row0, d_model, h);
  __syncthreads();
  const mx_half* q = (const mx_half*)smem;
  const mx_half* k = q + 64 * L::LD;
  mx_acc s[4];
  #pragma unroll
  for (int n = 0; n < 4; ++n) {
    #pragma unroll
    for (int e = 0; e < MX_ACC; ++e) s[n][e] = 0.f;
    #pragma unroll
    for (int kk = 0; kk < DEPTH; kk += 16) s[n] = mx_tile(s[n], q + q0 * L::LD + kk, L::LD, k + 16 * n * L::LD + kk, L::LD, lane);
  }
  __syncthreads();  // every wave is done with Q and K before the scores overwrite them
  constexpr float LOG2E = 1.4426950408889634f;
  const float scale = rsqrtf((float)DEPTH) * LOG2E;
  float* scores = (float*)smem;
  const __half* tile = bias ? bias + ((long)b * heads + h) * 4096 : nullptr;
  #pragma unroll
  for (int n = 0; n < 4; ++n) {
    #pragma unroll
    for (int e = 0; e < MX_ACC; ++e) {
      const int r = q0 + mx_row(lane, e), c = 16 * n + lane % 16;
      const float add = tile ? __half2float(tile[r * 64 + c]) * LOG2E : 0.f;
      scores[r * L::LDS + c] = fmaf(s[n][e], scale, add);
    }
  }
  __syncthreads();
  mx_half* p = (mx_half*)(smem + L::P);
  matrix_attention_softmax(scores, L::LDS, p, L::LDT, q0, lane);
  __syncthreads();
  const mx_half* vt = (const mx_half*)(smem + L::VT);
  #pragma unroll
  for (int n = 0; n < DEPTH / 16; ++n) {
    mx_acc o;
    #pragma unroll
    for (int e = 0; e < MX_ACC; ++e) o[e] = 0.f;
    #pragma unroll
    for (int kk = 0; kk < 64; kk += 16) o = mx_tile(o, p + q0 * L::LDT + kk, L::LDT, vt + 16 * n * L::LDT + kk, L::LDT, lane);
    const int c = 16 * n + lane % 16;
    const float vb = qkv_bias ? __half2float(qkv_bias[2 * d_model + h * DEPTH + c]) : 0.f;
    #pragma unroll
    for (int e = 0; e < MX_ACC; ++e) {
      const int r = q0 + mx_row(lane, e);
      ctx[(row0 + r) * d_model + h * DEPTH + c] = __float2half(o[e] + vb);
    }
  }
}

KERNEL void __launch_bounds__(MATRIX_ATTENTION_THREADS) attention_matrix_d16(const __half* qkv, const __half* qkv_bias, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  matrix_attention_body<16>(qkv, qkv_bias, bias, ctx, heads);
}
KERNEL void __launch_bounds__(MATRIX_ATTENTION_THREADS) attention_matrix_d32(const __half* qkv, const __half* qkv_bias, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  matrix_attention_body<32>(qkv, qkv_bias, bias, ctx, heads);
}
KERNEL void __launch_bounds__(MATRIX_ATTENTION_THREADS) attention_matrix_d64(const __half* qkv, const __half* qkv_bias, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  matrix_attention_body<64>(qkv, qkv_bias, bias, ctx, heads);
}

// One matrix instruction of form `form` (1–3, as in hip/prelude.h) on register contents as the
// caller lays them out, one wave per block: lane l reads its A, B and C elements (floats, A and
// B exact in fp16) from in[l·(2·AB + CD) …] and writes its D elements to out[l·CD …]. Forms this
// target lacks write NaN. Tests lay out A, B, C by the documented layouts on their own side, so
// the instruction (emulated or real) is checked against a plain matrix product.
template <int AB, int CD, typename VAB, typename VCD, typename Op>
static __device__ __forceinline__ void matrix_check_run(const float* input, float* output, Op op) {
  const int lane = threadIdx.x % WARP_SIZE;
  const float* mine = input + lane * (2 * AB + CD);
  VAB a, b;
  VCD c;
  #pragma unroll
  for (int e = 0; e < AB; ++e) {
    a[e] = (mx_half)mine[e];
    b[e] = (mx_half)mine[AB + e];
  }
  #if defined(__clang_major__) && __clang_major__ < 16 && !defined(GPU_EMU)
  // clang 15 (HIP 5.2) aborts on a WMMA whose C comes from memory ("Operand has incorrect
  // register class"): there C goes in as zero and is added to D after the instruction.
  #pragma unroll
  for (int e = 0; e < CD; ++e) c[e] = 0.f;
  const VCD d = op(a, b, c);
  #pragma unroll
  for (int e = 0; e < CD; ++e) output[lane * CD + e] = d[e] + mine[2 * AB + e];
  #else
  #pragma unroll
  for (int e = 0; e < CD; ++e) c[e] = mine[2 * AB + e];
  const VCD d = op(a, b, c);
  #pragma unroll
  for (int e = 0; e < CD; ++e) output[lane * CD + e] = d[e];
  #endif
}

KERNEL void matrix_instruction_check(const float* input, float* output, int form) {
  PRIOR_KERNELS_DONE();
  const int lane = threadIdx.x % WARP_SIZE;
  #if defined(HAS_MATRIX_FORM_1)
  if (form == MATRIX_WMMA_GFX11) {
    matrix_check_run<16, 8, mx_half16, mx_float8>(input, output, [](mx_half16 a, mx_half16 b, mx_float8 c) {
      return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
    });
    return;
  }
  #endif
  #if defined(HAS_MATRIX_FORM_2)
  if (form == MATRIX_WMMA_GFX12) {
    matrix_check_run<8, 8, mx_half8, mx_float8>(input, output, [](mx_half8 a, mx_half8 b, mx_float8 c) {
      return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
    });
    return;
  }
  #endif
  #if defined(HAS_MATRIX_FORM_3)
  if (form == MATRIX_MFMA_16) {
    matrix_check_run<4, 4, mx_half4, mx_float4>(input, output, [](mx_half4 a, mx_half4 b, mx_float4 c) {
      return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
    });
    return;
  }
  #endif
  output[lane] = __builtin_nanf("");
}
#endif
