// lc0rs attention kernels (attention bodies): the portable one, and NVIDIA's tensor-core one.

// Threads per block of the attention kernels (the Rust side's ATTENTION_THREADS).
#define ATTENTION_THREADS 128

// Shared-memory layout of the portable attention (in floats). Q is held as rows and K
// transposed, both converted to fp32 once, so the score loop reads operands without conversions;
// the probabilities P and V (fp32) then overwrite them. Every row stride is a multiple of 4 (16-byte
// reads) and ≡ 4 mod 32 or 20 mod 32 banks, so the rows g, g+1, … that the row groups of a warp
// read at once start in different 4-bank quads for 32 and 64 lanes: reads free of bank conflicts.
template <int DEPTH>
struct PortableAttentionLayout {
  static constexpr int LDQ = DEPTH + 4;
  static constexpr int LDK = 64 + 4;
  static constexpr int LDP = 64 + 4;
  static constexpr int LDV = DEPTH + 4;
  static constexpr int QK = 64 * LDQ + DEPTH * LDK;
  static constexpr int PV = 64 * LDP + 64 * LDV;
  static constexpr int SHARED = QK > PV ? QK : PV;
};

// Eight values of a QKV row plus, where the GEMM left it out (qkv_bias not null), their bias.
static __device__ __forceinline__ void load8_plus_bias(const __half* src, const __half* qkv_bias, long col,
                                                       float* out) {
  load8(src, out);
  if (qkv_bias) {
    float b[8];
    load8(qkv_bias + col, b);
    #pragma unroll
    for (int e = 0; e < 8; ++e) out[e] += b[e];
  }
}

// N consecutive floats of shared memory (N = 2, 8-byte aligned; or a multiple of 4, 16-byte
// aligned).
template <int N>
static __device__ __forceinline__ void load_floats(float* dst, const float* src) {
  if constexpr (N == 2) {
    LC0RS_MEMCPY(dst, __builtin_assume_aligned(src, 8), 8);
  } else {
    #pragma unroll
    for (int i = 0; i < N; i += 4) copy16(dst + i, src + i);
  }
}

// N floats (a multiple of 4; 16-byte aligned) to shared memory, as 16-byte stores.
template <int N>
static __device__ __forceinline__ void store_floats(float* dst, const float* src) {
  #pragma unroll
  for (int i = 0; i < N; i += 4) copy16(dst + i, src + i);
}

// Attention for 64 tokens, one block of 128 threads per (head, position). Q, K, V are read in
// place from the fused QKV output ([rows][3·d_model]: q | k | v), plus its bias qkv_bias
// ([3·d_model], may be null: a BLAS GEMM has no bias epilogue, so this saves a pass over QKV);
// the smolgen bias ([position][head][64][64], may be null) is added after the 1/sqrt(depth)
// scale; softmax in fp32; the context goes to ctx ([rows][d_model]).
// Thread t, in row group g = t/8, owns query rows g, g+16, g+32, g+48 and, with kq = t % 8, keys
// 4·kq … +3 and 32 + 4·kq … +3: its 32 scores stay in registers, a row's max and sum come from
// the 8 neighbouring lanes that share it (shuffles within groups of 8, so any warp size works),
// and each step of the score loop feeds 128 FMAs from 12 shared loads of 16 bytes. The context
// step gives each thread the same rows and DEPTH/8 output columns (at depth 32, 64 FMAs from 8
// loads per step). V waits in registers while the scores are computed, so Q, K and then P, V
// share one allocation (26 KB at depth 32, 34 KB at 64). Every product is an explicit fma:
// `acc += a·b + c·d` compiles to a multiply, an fma and an add (measured: 2.3 instructions per
// FMA where 1 is the aim). Portable: no tensor cores, no warp-size assumption beyond 8.
template <int DEPTH>
static __device__ void attention_body(const __half* __restrict__ qkv, const __half* __restrict__ qkv_bias,
                                      const __half* __restrict__ bias, __half* __restrict__ ctx, int heads) {
  using L = PortableAttentionLayout<DEPTH>;
  __shared__ __align__(16) float smem[L::SHARED];
  float* qf = smem;                 // [64][LDQ]
  float* kt = smem + 64 * L::LDQ;   // [DEPTH][LDK]
  float* pf = smem;                 // [64][LDP], once the scores are in registers
  float* vf = smem + 64 * L::LDP;   // [64][LDV], likewise
  const int h = blockIdx.x, b = blockIdx.y, t = threadIdx.x;
  const int d_model = heads * DEPTH, stride = 3 * d_model;
  const long row0 = (long)b * 64;
  constexpr int CHUNKS = DEPTH / 8;
  constexpr int ROW_STEP = ATTENTION_THREADS / CHUNKS;
  constexpr int V_ROWS = 64 / ROW_STEP;
  // Q to shared memory and V to registers (it goes to shared memory once Q and K are done with):
  // neighbouring threads read neighbouring 16-byte chunks of a row. A thread's chunk column stays
  // the same on every row it takes (ATTENTION_THREADS is a multiple of CHUNKS), so its biases are
  // loaded once.
  // Q is stored pre-multiplied by the softmax's scale, 1/sqrt(depth) in base 2 (see below).
  constexpr float LOG2E = 1.4426950408889634f;
  const float scale = rsqrtf((float)DEPTH) * LOG2E;
  const int chunk = (t % CHUNKS) * 8;
  __align__(16) __half2 v_raw[V_ROWS][4];
  {
    const long col = h * DEPTH + chunk;
    float q_bias[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (qkv_bias) load8(qkv_bias + col, q_bias);
    #pragma unroll
    for (int i = 0; i < V_ROWS; ++i) {
      const int r = t / CHUNKS + i * ROW_STEP;
      const __half* src = qkv + (row0 + r) * stride + col;
      __align__(16) float q[8];
      load8(src, q);
      copy16(v_raw[i], src + 2 * d_model);
      #pragma unroll
      for (int e = 0; e < 8; ++e) q[e] = (q[e] + q_bias[e]) * scale;
      store_floats<8>(qf + r * L::LDQ + chunk, q);
    }
  }
  // K, transposed: neighbouring threads take neighbouring rows, so their column writes do not collide.
  {
    const int r = t % 64;
    constexpr int STEP = (ATTENTION_THREADS / 64) * 8;
    #pragma unroll
    for (int i = 0; i < DEPTH / STEP; ++i) {
      const int c = (t / 64) * 8 + i * STEP;
      const long col = d_model + h * DEPTH + c;
      float k[8];
      load8_plus_bias(qkv + (row0 + r) * stride + col, qkv_bias, col, k);
      #pragma unroll
      for (int e = 0; e < 8; ++e) kt[(c + e) * L::LDK + r] = k[e];
    }
  }
  __syncthreads();
  const int g = t / 8, kq = t % 8;
  // Scores: acc[i][e] is query g + 16·i against key 4·kq + e (e < 4) or 32 + 4·kq + e − 4.
  __align__(16) float acc[4][8];
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int e = 0; e < 8; ++e) acc[i][e] = 0.f;
  #pragma unroll 2
  for (int j = 0; j < DEPTH; j += 4) {
    __align__(16) float qv[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) copy16(qv[i], qf + (g + 16 * i) * L::LDQ + j);
    #pragma unroll
    for (int u = 0; u < 4; ++u) {
      __align__(16) float k[8];
      copy16(k, kt + (j + u) * L::LDK + 4 * kq);
      copy16(k + 4, kt + (j + u) * L::LDK + 32 + 4 * kq);
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int e = 0; e < 8; ++e) acc[i][e] = fmaf(qv[i][u], k[e], acc[i][e]);
    }
  }
  // Bias and softmax per row, in registers, in base 2: Q carries the scale times log2(e), so that
  // each exponential is one exp2 (the hardware's own). The smolgen bias of all four rows is
  // loaded before any is used: one wait for memory, not four.
  __align__(8) __half2 row_bias[4][4];
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (bias) {
      const __half* src = bias + ((long)b * heads + h) * 4096 + (g + 16 * i) * 64 + 4 * kq;
      LC0RS_MEMCPY(row_bias[i], __builtin_assume_aligned(src, 8), 8);
      LC0RS_MEMCPY(row_bias[i] + 2, __builtin_assume_aligned(src + 32, 8), 8);
    } else {
      #pragma unroll
      for (int e = 0; e < 4; ++e) row_bias[i][e] = __floats2half2_rn(0.f, 0.f);
    }
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    float mx = -3.0e38f;
    #pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 bv = __half22float2(row_bias[i][e]);
      acc[i][2 * e] = fmaf(bv.x, LOG2E, acc[i][2 * e]);
      acc[i][2 * e + 1] = fmaf(bv.y, LOG2E, acc[i][2 * e + 1]);
      mx = fmaxf(mx, fmaxf(acc[i][2 * e], acc[i][2 * e + 1]));
    }
    mx = fmaxf(mx, SHFL_XOR(mx, 1));
    mx = fmaxf(mx, SHFL_XOR(mx, 2));
    mx = fmaxf(mx, SHFL_XOR(mx, 4));
    float sum = 0.f;
    #pragma unroll
    for (int e = 0; e < 8; ++e) {
      acc[i][e] = exp2_approx(acc[i][e] - mx);
      sum += acc[i][e];
    }
    sum += SHFL_XOR(sum, 1);
    sum += SHFL_XOR(sum, 2);
    sum += SHFL_XOR(sum, 4);
    const float inv = rcp_approx(sum);  // sum ≥ 1: the row's maximum contributes 2⁰
    #pragma unroll
    for (int e = 0; e < 8; ++e) acc[i][e] *= inv;
  }
  __syncthreads();  // every thread is done with Q and K before P and V overwrite them
  // 16-byte stores: the 8 lanes of a row group write one 128-byte run, conflict-free.
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    float* row = pf + (g + 16 * i) * L::LDP + 4 * kq;
    store_floats<4>(row, acc[i]);
    store_floats<4>(row + 32, acc[i] + 4);
  }
  #pragma unroll
  for (int i = 0; i < V_ROWS; ++i) {
    __align__(16) float v[8];
    #pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __half22float2(v_raw[i][e]);
      v[2 * e] = f.x;
      v[2 * e + 1] = f.y;
    }
    store_floats<8>(vf + (t / CHUNKS + i * ROW_STEP) * L::LDV + chunk, v);
  }
  __syncthreads();
  // Context: rows g + 16·i, columns j0 … j0 + DEPTH/8 − 1, four keys per step.
  constexpr int COLS = DEPTH / 8;
  const int j0 = kq * COLS;
  float out[4][COLS];
  #pragma unroll
  for (int i = 0; i < 4; ++i)
    #pragma unroll
    for (int c = 0; c < COLS; ++c) out[i][c] = 0.f;
  #pragma unroll 2
  for (int k = 0; k < 64; k += 4) {
    __align__(16) float pv[4][4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) copy16(pv[i], pf + (g + 16 * i) * L::LDP + k);
    #pragma unroll
    for (int u = 0; u < 4; ++u) {
      __align__(16) float v[COLS];
      load_floats<COLS>(v, vf + (k + u) * L::LDV + j0);
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        #pragma unroll
        for (int c = 0; c < COLS; ++c) out[i][c] = fmaf(pv[i][u], v[c], out[i][c]);
    }
  }
  // V's bias, added here: each row of P sums to 1, so P·(V + 1·biasᵀ) = P·V + 1·biasᵀ.
  __align__(16) __half2 v_bias[COLS / 2];
  if (qkv_bias) {
    LC0RS_MEMCPY(v_bias, __builtin_assume_aligned(qkv_bias + 2 * d_model + h * DEPTH + j0, 2 * COLS), 2 * COLS);
  } else {
    #pragma unroll
    for (int c = 0; c < COLS / 2; ++c) v_bias[c] = __floats2half2_rn(0.f, 0.f);
  }
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    __align__(16) __half2 o[COLS / 2];
    #pragma unroll
    for (int c = 0; c < COLS / 2; ++c) {
      const float2 vb = __half22float2(v_bias[c]);
      o[c] = __floats2half2_rn(out[i][2 * c] + vb.x, out[i][2 * c + 1] + vb.y);
    }
    __half* dst = ctx + (row0 + g + 16 * i) * d_model + h * DEPTH + j0;
    LC0RS_MEMCPY(__builtin_assume_aligned((void*)dst, 2 * COLS), o, 2 * COLS);
  }
}

KERNEL void __launch_bounds__(ATTENTION_THREADS) attention_d16(const __half* qkv, const __half* qkv_bias, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  attention_body<16>(qkv, qkv_bias, bias, ctx, heads);
}
KERNEL void __launch_bounds__(ATTENTION_THREADS) attention_d32(const __half* qkv, const __half* qkv_bias, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  attention_body<32>(qkv, qkv_bias, bias, ctx, heads);
}
KERNEL void __launch_bounds__(ATTENTION_THREADS) attention_d64(const __half* qkv, const __half* qkv_bias, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  attention_body<64>(qkv, qkv_bias, bias, ctx, heads);
}

#if defined(GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
// The NVIDIA fast path of the attention above (mma.sync m16n8k16, ldmatrix and cp.async: sm_80 and
// newer; older GPUs run the portable kernel): the same inputs and outputs, on tensor cores with
// the scores kept in registers (as FlashAttention does). One block of 4 warps per (head,
// position); each warp owns 16 queries: S = Q·Kᵀ with mma.sync m16n8k16 (fp16 in, fp32
// accumulate) into 8 accumulator tiles, then scale, smolgen bias (prefetched into registers at
// the start), softmax across each row's quad of lanes, and the probabilities, rounded to fp16 as
// lc0's fp16 path does, become the A operand of O = P·V without leaving registers. Q, K, V and
// the bias tile are copied to shared memory with 16-byte loads; fragments come from there with
// ldmatrix (V transposed on the way). Fragment layouts: PTX ISA, "mma.m16n8k16" (g = lane/4 is
// the row, 2·(lane%4) the column pair).
#define MMA_ATTENTION_THREADS 128
template <int DEPTH>
struct AttentionStage {
  static constexpr int LD = DEPTH + 8;  // row stride (halves) of Q, K, V: 16-byte rows, conflict-free
  static constexpr int LDB = 64 + 8;    // row stride of the bias tile
  __half q[64 * LD];
  __half k[64 * LD];
  __half v[64 * LD];
  __half bias[64 * LDB];
};
// Starts the copies of head h's Q, K, V and bias tile into `st`.
template <int DEPTH>
static __device__ __forceinline__ void attention_stage_load(AttentionStage<DEPTH>& st, const __half* qkv,
                                                            const __half* bias, long row0, int stride,
                                                            int d_model, int heads, int b, int h) {
  constexpr int LD = AttentionStage<DEPTH>::LD, LDB = AttentionStage<DEPTH>::LDB;
  constexpr int CHUNKS = DEPTH / 8;
  for (int i = threadIdx.x; i < 64 * CHUNKS; i += MMA_ATTENTION_THREADS) {
    const int r = i / CHUNKS, c = (i % CHUNKS) * 8;
    const __half* src = qkv + (row0 + r) * stride + h * DEPTH + c;
    copy16_async(st.q + r * LD + c, src);
    copy16_async(st.k + r * LD + c, src + d_model);
    copy16_async(st.v + r * LD + c, src + 2 * d_model);
  }
  if (bias) {
    const __half* tile = bias + ((long)b * heads + h) * 4096;
    for (int i = threadIdx.x; i < 512; i += MMA_ATTENTION_THREADS)
      copy16_async(st.bias + (i / 8) * LDB + (i % 8) * 8, tile + i * 8);
  }
}
// `heads_per_block` heads of one position per block (the host picks 1 for small batches, so
// that every multiprocessor gets work), two shared-memory stages where they fit in 48 KB
// (depth 16, 32): the copies of the next head run while this one computes.
template <int DEPTH>
static __device__ void attention_mma_body(const __half* __restrict__ qkv, const __half* __restrict__ bias,
                                          __half* __restrict__ ctx, int heads, int heads_per_block) {
  constexpr int LD = AttentionStage<DEPTH>::LD, LDB = AttentionStage<DEPTH>::LDB;
  constexpr int OUT_TILES = DEPTH / 8;
  constexpr int STAGES = 2 * sizeof(AttentionStage<DEPTH>) <= 48 * 1024 ? 2 : 1;
  __shared__ __align__(16) AttentionStage<DEPTH> stages[STAGES];
  const int b = blockIdx.y, t = threadIdx.x;
  const int lane = t % 32, g = lane / 4, tq = lane % 4;
  const int q0 = (t / 32) * 16;
  const int d_model = heads * DEPTH, stride = 3 * d_model;
  const long row0 = (long)b * 64;
  const int h_first = blockIdx.x * heads_per_block;
  const int h_end = min(heads, h_first + heads_per_block);
  attention_stage_load<DEPTH>(stages[0], qkv, bias, row0, stride, d_model, heads, b, h_first);
  asm volatile("cp.async.commit_group;\n" ::);
  for (int h = h_first; h < h_end; ++h) {
    const int cur = STAGES == 2 ? (h - h_first) & 1 : 0;
    if (STAGES == 2 && h + 1 < h_end)
      attention_stage_load<DEPTH>(stages[cur ^ 1], qkv, bias, row0, stride, d_model, heads, b, h + 1);
    asm volatile("cp.async.commit_group;\n" ::);
    // This head's copies are done; with two stages the next head's may still be in flight.
    if (STAGES == 2) {
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    const AttentionStage<DEPTH>& st = stages[cur];
    float s[8][4];
    #pragma unroll
    for (int j = 0; j < 8; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) s[j][e] = 0.f;
    #pragma unroll
    for (int kk = 0; kk < DEPTH; kk += 16) {
      u32 a[4];
      ldmatrix_x4(a, st.q + (q0 + lane % 16) * LD + kk + (lane / 16) * 8);
      #pragma unroll
      for (int j = 0; j < 8; j += 2) {
        // Keys 8j..8j+15: b0/b1 of tile j, then of tile j+1.
        u32 kb[4];
        ldmatrix_x4(kb, st.k + (8 * j + lane % 8 + (lane / 16) * 8) * LD + kk + ((lane / 8) % 2) * 8);
        mma_16816(s[j], a, kb);
        mma_16816(s[j + 1], a, kb + 2);
      }
    }
    // Scale, bias, softmax over each of this lane's two rows (its quad holds the rest of the row).
    const float scale = rsqrtf((float)DEPTH);
    float mx[2] = {-3.0e38f, -3.0e38f};
    #pragma unroll
    for (int j = 0; j < 8; ++j) {
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        float2 bv = make_float2(0.f, 0.f);
        if (bias) bv = __half22float2(*(const __half2*)(st.bias + (q0 + g + 8 * r) * LDB + 8 * j + 2 * tq));
        s[j][2 * r] = s[j][2 * r] * scale + bv.x;
        s[j][2 * r + 1] = s[j][2 * r + 1] * scale + bv.y;
        mx[r] = fmaxf(mx[r], fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      }
    }
    float sum[2] = {0.f, 0.f};
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], SHFL_XOR(mx[r], 1));
      mx[r] = fmaxf(mx[r], SHFL_XOR(mx[r], 2));
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        s[j][2 * r] = expf(s[j][2 * r] - mx[r]);
        s[j][2 * r + 1] = expf(s[j][2 * r + 1] - mx[r]);
        sum[r] += s[j][2 * r] + s[j][2 * r + 1];
      }
      sum[r] += SHFL_XOR(sum[r], 1);
      sum[r] += SHFL_XOR(sum[r], 2);
      sum[r] = 1.f / sum[r];
    }
    // P as A fragments: keys 16p .. 16p+15 are score tiles 2p and 2p+1.
    u32 p_frag[4][4];
    #pragma unroll
    for (int p = 0; p < 4; ++p) {
      p_frag[p][0] = pack_half2(s[2 * p][0] * sum[0], s[2 * p][1] * sum[0]);
      p_frag[p][1] = pack_half2(s[2 * p][2] * sum[1], s[2 * p][3] * sum[1]);
      p_frag[p][2] = pack_half2(s[2 * p + 1][0] * sum[0], s[2 * p + 1][1] * sum[0]);
      p_frag[p][3] = pack_half2(s[2 * p + 1][2] * sum[1], s[2 * p + 1][3] * sum[1]);
    }
    float o[OUT_TILES][4];
    #pragma unroll
    for (int n = 0; n < OUT_TILES; ++n)
      #pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;
    #pragma unroll
    for (int p = 0; p < 4; ++p) {
      #pragma unroll
      for (int n = 0; n < OUT_TILES; n += 2) {
        // V rows (keys) 16p..16p+15, columns 8n..8n+15, transposed: b0/b1 of tiles n and n+1.
        u32 vb[4];
        ldmatrix_x4_trans(vb, st.v + (16 * p + lane % 8 + ((lane / 8) % 2) * 8) * LD + 8 * n + (lane / 16) * 8);
        mma_16816(o[n], p_frag[p], vb);
        mma_16816(o[n + 1], p_frag[p], vb + 2);
      }
    }
    __half* out = ctx + (row0 + q0 + g) * d_model + h * DEPTH + 2 * tq;
    #pragma unroll
    for (int n = 0; n < OUT_TILES; ++n) {
      *(__half2*)(out + 8 * n) = __floats2half2_rn(o[n][0], o[n][1]);
      *(__half2*)(out + 8 * d_model + 8 * n) = __floats2half2_rn(o[n][2], o[n][3]);
    }
    // The next iteration's copies overwrite this stage.
    __syncthreads();
    if (STAGES == 1 && h + 1 < h_end)
      attention_stage_load<DEPTH>(stages[0], qkv, bias, row0, stride, d_model, heads, b, h + 1);
  }
}

KERNEL void attention_mma_d16(const __half* qkv, const __half* bias, __half* ctx, int heads, int heads_per_block) { PRIOR_KERNELS_DONE(); attention_mma_body<16>(qkv, bias, ctx, heads, heads_per_block); }
KERNEL void attention_mma_d32(const __half* qkv, const __half* bias, __half* ctx, int heads, int heads_per_block) { PRIOR_KERNELS_DONE(); attention_mma_body<32>(qkv, bias, ctx, heads, heads_per_block); }
KERNEL void attention_mma_d64(const __half* qkv, const __half* bias, __half* ctx, int heads, int heads_per_block) { PRIOR_KERNELS_DONE(); attention_mma_body<64>(qkv, bias, ctx, heads, heads_per_block); }
#endif
