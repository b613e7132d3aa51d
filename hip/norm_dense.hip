// lc0rs dense layers for small batches on NVIDIA tensor cores: a plain one, and one fused with the
// residual LayerNorm before it.

#if defined(GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
// layer_norm_dense_mma. At batch 1 a layer is a chain of small dependent kernels of 2-4 µs
// each, weights in L2 or not (measured: docs/performance.md), so the pass is bound by their
// number. This kernel is three of them in one: the residual LayerNorm, the dense layer that reads
// its output, and that layer's bias and activation:
//   normed = LN(alpha·(x + x_bias) + skip)        (x_bias may be null)
//   y      = act(normed·Wᵀ + bias)                 (bias may be null)
// with W [n][k] row-major. A block owns 16 rows and 32 outputs: its 8 warps first load their
// share of W (a k/8-wide slice of the 32 weight rows) into registers, so that the weights, the
// one DRAM read, are in flight while the block normalises its 16 rows (16 threads per row, the
// row in registers; the statistics in fp32, two passes, as layer_norm_warp) into shared memory
// as fp16. Each warp then
// multiplies its k/8 slice with mma.sync m16n8k16 (fp32 accumulation), the 8 partial tiles are
// summed in shared memory, and the epilogue adds the bias and applies the activation. Every
// block of a row group computes the same LayerNorm; those in the first column of blocks also
// write it to `normed` (the residual stream of the next sublayer), which therefore must not alias
// x or skip. Shapes: m and n multiples of 16 and 32; k (a template argument: one member per
// width) 256, 512, 768 or 1024. Gamma, beta and x_bias are copied into shared memory before the
// wait (cp.async: no registers held for them), which keeps the 1024-wide member below 255
// registers without spills.
//
// The k order inside a 32-wide chunk is permuted the same way for A and B (a dot product does not
// care): lane (g = lane/4, tq = lane%4) holds 16 contiguous bytes at k = 8·tq of a weight row and
// of its two A rows, and its fragments for the chunk's two mma steps are the first and second
// 8 bytes of those, so A and W load as whole 16-byte vectors without ldmatrix.
#define NORM_DENSE_THREADS 256
#define NORM_DENSE_ROWS 16
#define NORM_DENSE_COLS 32
#define NORM_DENSE_MAX_K 1024
// Row stride of the normalised rows in shared memory (halves): 64 bytes more than a row, so that
// the 8 lanes of a quarter warp (two rows, four 16-byte columns) hit distinct banks.
#define NORM_DENSE_LDA(k) ((k) + 32)
// Byte offset of gamma, beta and x_bias (k halves each) in layer_norm_dense_mma's shared memory:
// after the normalised rows or the 8 warps' fp32 partial tiles (which reuse the rows' space),
// whichever is larger.
#define NORM_DENSE_PARTIAL_BYTES (8 * NORM_DENSE_ROWS * (NORM_DENSE_COLS + 4) * 4)
#define NORM_DENSE_ROW_BYTES(k) (NORM_DENSE_ROWS * NORM_DENSE_LDA(k) * 2)
#define NORM_DENSE_PARAMS_OFFSET(k) \
  (NORM_DENSE_ROW_BYTES(k) > NORM_DENSE_PARTIAL_BYTES ? NORM_DENSE_ROW_BYTES(k) : NORM_DENSE_PARTIAL_BYTES)

// This warp's share of the block's 32 weight rows for mma_16816's B fragments: rows
// col0 + 8j + g, 16 bytes at k = k_warp + 32c + 8·tq of each (the k permutation above).
template <int K>
static __device__ void load_weight_slice(u32 (*wb)[NORM_DENSE_COLS / 8][4], const __half* __restrict__ w,
                                         int col0, int k_warp, int g, int tq) {
  #pragma unroll
  for (int c = 0; c < K / 256; ++c)
    #pragma unroll
    for (int j = 0; j < NORM_DENSE_COLS / 8; ++j)
      copy16(wb[c][j], w + (long)(col0 + 8 * j + g) * K + k_warp + 32 * c + 8 * tq);
}

// The partial tiles of a block's 8 warps summed in shared memory, then bias and activation, two
// outputs per thread; rows from m on (a last, partial row group) are not stored.
static __device__ void dense_mma_store(float* partial, const float (*acc)[4], const __half* __restrict__ bias,
                                       int act, __half* __restrict__ y, long row0, int col0, int m, int n) {
  constexpr int TILES = NORM_DENSE_COLS / 8, LDR = NORM_DENSE_COLS + 4;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, g = lane / 4, tq = lane % 4;
  #pragma unroll
  for (int j = 0; j < TILES; ++j) {
    float* p = partial + (warp * NORM_DENSE_ROWS + g) * LDR + 8 * j + 2 * tq;
    p[0] = acc[j][0];
    p[1] = acc[j][1];
    p[8 * LDR] = acc[j][2];
    p[8 * LDR + 1] = acc[j][3];
  }
  __syncthreads();
  const int r = t / (NORM_DENSE_COLS / 2), c = 2 * (t % (NORM_DENSE_COLS / 2));
  float out0 = 0.f, out1 = 0.f;
  #pragma unroll
  for (int q = 0; q < NORM_DENSE_THREADS / 32; ++q) {
    out0 += partial[(q * NORM_DENSE_ROWS + r) * LDR + c];
    out1 += partial[(q * NORM_DENSE_ROWS + r) * LDR + c + 1];
  }
  if (bias) {
    const float2 b = __half22float2(*(const __half2*)(bias + col0 + c));
    out0 += b.x;
    out1 += b.y;
  }
  if (row0 + r < m)
    *(__half2*)(y + (row0 + r) * n + col0 + c) = __floats2half2_rn(activate(out0, act), activate(out1, act));
}

template <int K>
static __device__ void layer_norm_dense_mma_body(__half* __restrict__ normed, const __half* __restrict__ x,
                                                 const __half* __restrict__ x_bias, float alpha,
                                                 const __half* __restrict__ skip, const __half* __restrict__ gamma,
                                                 const __half* __restrict__ beta, float eps, const __half* __restrict__ w,
                                                 const __half* __restrict__ bias, int act, __half* __restrict__ y, int n) {
  static_assert(K % 256 == 0 && K <= NORM_DENSE_MAX_K, "k: 256, 512, 768 or 1024");
  constexpr int CHUNKS = K / 256;   // 32-wide k chunks per warp
  constexpr int ITERS = K / 128;    // chunks of 8 values per thread in the LayerNorm
  constexpr int TILES = NORM_DENSE_COLS / 8;
  constexpr int LDA = NORM_DENSE_LDA(K);
  constexpr int K_WARP = K / 8;
  DYNAMIC_SHARED(float, shared_floats);
  __half* a = (__half*)shared_floats;  // [16][LDA]
  __half* params = (__half*)((char*)shared_floats + NORM_DENSE_PARAMS_OFFSET(K));  // gamma, beta, x_bias
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, g = lane / 4, tq = lane % 4;
  const long row0 = (long)blockIdx.y * NORM_DENSE_ROWS;
  const int col0 = blockIdx.x * NORM_DENSE_COLS;
  const int k_warp = warp * K_WARP;

  // 1. This warp's weights: rows col0 + 8j + g, 16 bytes per chunk.
  __align__(16) u32 wb[CHUNKS][TILES][4];
  load_weight_slice<K>(wb, w, col0, k_warp, g, tq);
  // The weights, the LayerNorm's gamma and beta and the input's bias are no kernel's output,
  // so they load before the wait: with programmatic launch their round trips overlap the
  // previous kernel, and after it only the rows themselves are loaded. The three vectors go
  // straight to shared memory (read at the barrier below).
  for (int c = 8 * t; c < K; c += 8 * NORM_DENSE_THREADS) {
    copy16_async(params + c, gamma + c);
    copy16_async(params + K + c, beta + c);
    if (x_bias) copy16_async(params + 2 * K + c, x_bias + c);
  }
  asm volatile("cp.async.commit_group;\n" ::);
  PRIOR_KERNELS_DONE();

  // 2. LayerNorm of the block's rows: 16 threads per row, chunks of 8 values strided by 16. All
  // loads are issued before the first value is used (a loop that converts as it loads waits for
  // L2 once per chunk), and the row stays in registers for the three passes.
  const int r = t / 16, sub = t % 16;
  {
    const long base = (row0 + r) * K;
    __align__(16) __half2 hx[ITERS][4], hs[ITERS][4];
    #pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int c = (sub + 16 * it) * 8;
      copy16(hx[it], x + base + c);
      copy16(hs[it], skip + base + c);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
    float v[ITERS][8];
    float sum = 0.f;
    #pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      __align__(16) __half2 hb[4];
      if (x_bias) copy16(hb, params + 2 * K + (sub + 16 * it) * 8);
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 in = __half22float2(hx[it][j]);
        if (x_bias) {
          const float2 b = __half22float2(hb[j]);
          in.x += b.x;
          in.y += b.y;
        }
        const float2 sk = __half22float2(hs[it][j]);
        v[it][2 * j] = in.x * alpha + sk.x;
        v[it][2 * j + 1] = in.y * alpha + sk.y;
        sum += v[it][2 * j] + v[it][2 * j + 1];
      }
    }
    #pragma unroll
    for (int m = 8; m > 0; m /= 2) sum += SHFL_XOR(sum, m);
    const float mean = sum / K;
    float var = 0.f;
    #pragma unroll
    for (int it = 0; it < ITERS; ++it)
      #pragma unroll
      for (int j = 0; j < 8; ++j) var += (v[it][j] - mean) * (v[it][j] - mean);
    #pragma unroll
    for (int m = 8; m > 0; m /= 2) var += SHFL_XOR(var, m);
    const float inv = rsqrtf(var / K + eps);
    #pragma unroll
    for (int it = 0; it < ITERS; ++it) {
      const int c = (sub + 16 * it) * 8;
      __align__(16) __half2 hg[4], hbt[4];
      copy16(hg, params + c);
      copy16(hbt, params + K + c);
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 gm = __half22float2(hg[j]), bt = __half22float2(hbt[j]);
        v[it][2 * j] = (v[it][2 * j] - mean) * inv * gm.x + bt.x;
        v[it][2 * j + 1] = (v[it][2 * j + 1] - mean) * inv * gm.y + bt.y;
      }
      store8(a + r * LDA + c, v[it]);
      if (blockIdx.x == 0) store8(normed + base + c, v[it]);
    }
  }
  __syncthreads();

  // 3. This warp's k slice: per chunk, rows g and g+8 at k = 8·tq, two mma steps per tile.
  float acc[TILES][4];
  #pragma unroll
  for (int j = 0; j < TILES; ++j)
    #pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  #pragma unroll
  for (int c = 0; c < CHUNKS; ++c) {
    __align__(16) u32 lo[4], hi[4];
    const int kk = k_warp + 32 * c + 8 * tq;
    copy16(lo, a + g * LDA + kk);
    copy16(hi, a + (g + 8) * LDA + kk);
    #pragma unroll
    for (int s = 0; s < 2; ++s) {
      const u32 frag[4] = {lo[2 * s], hi[2 * s], lo[2 * s + 1], hi[2 * s + 1]};
      #pragma unroll
      for (int j = 0; j < TILES; ++j) mma_16816(acc[j], frag, &wb[c][j][2 * s]);
    }
  }

  // 4. The 8 warps' partial tiles summed where the normalised rows were (no longer needed).
  __syncthreads();
  dense_mma_store(shared_floats, acc, bias, act, y, row0, col0, gridDim.y * NORM_DENSE_ROWS, n);
}

// y = act(x·Wᵀ + bias) for a few rows (a pass's per-square layers at batch 1: 64 rows), with W
// [n][k] and x [m][k] row-major, bias may be null. A library GEMM runs such a shape as a K loop
// of dependent loads on few blocks; here a block owns GROUPS groups of 16 rows and 32 outputs:
// its 8 warps each load a k/8-wide slice of the 32 weight rows into registers before waiting for
// the previous kernel (weights are no kernel's output, so with programmatic launch their DRAM
// round trip overlaps that kernel), then their two A rows per lane and group straight from
// global memory (one round trip; rows from m on read as zero), multiply with mma.sync m16n8k16
// (fp32 accumulation), and the partial tiles meet in shared memory, one group after another.
// More groups per block load each weight slice fewer times (the weights are most of the bytes
// a wide layer moves at batch 1) at the cost of registers. Same k permutation as
// layer_norm_dense_mma. n a multiple of 32; k (the template argument) a multiple of 256.
template <int K, int GROUPS>
static __device__ void dense_mma_body(const __half* __restrict__ x, const __half* __restrict__ w,
                                      const __half* __restrict__ bias, int act, __half* __restrict__ y, int m,
                                      int n) {
  static_assert(K % 256 == 0, "k: a multiple of 256");
  constexpr int CHUNKS = K / 256, TILES = NORM_DENSE_COLS / 8, K_WARP = K / 8;
  __shared__ float partial[8 * NORM_DENSE_ROWS * (NORM_DENSE_COLS + 4)];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, tq = lane % 4;
  const long row0 = (long)blockIdx.y * NORM_DENSE_ROWS * GROUPS;
  const int col0 = blockIdx.x * NORM_DENSE_COLS, k_warp = warp * K_WARP;

  __align__(16) u32 wb[CHUNKS][TILES][4];
  load_weight_slice<K>(wb, w, col0, k_warp, g, tq);
  PRIOR_KERNELS_DONE();

  __align__(16) u32 lo[GROUPS][CHUNKS][4], hi[GROUPS][CHUNKS][4];
  #pragma unroll
  for (int q = 0; q < GROUPS; ++q) {
    const long r = row0 + NORM_DENSE_ROWS * q + g;
    #pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
      const long kk = k_warp + 32 * c + 8 * tq;
      #pragma unroll
      for (int e = 0; e < 4; ++e) lo[q][c][e] = hi[q][c][e] = 0u;
      if (r < m) copy16(lo[q][c], x + r * K + kk);
      if (r + 8 < m) copy16(hi[q][c], x + (r + 8) * K + kk);
    }
  }
  float acc[GROUPS][TILES][4];
  #pragma unroll
  for (int q = 0; q < GROUPS; ++q)
    #pragma unroll
    for (int j = 0; j < TILES; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) acc[q][j][e] = 0.f;
  #pragma unroll
  for (int q = 0; q < GROUPS; ++q)
    #pragma unroll
    for (int c = 0; c < CHUNKS; ++c)
      #pragma unroll
      for (int s = 0; s < 2; ++s) {
        const u32 frag[4] = {lo[q][c][2 * s], hi[q][c][2 * s], lo[q][c][2 * s + 1], hi[q][c][2 * s + 1]};
        #pragma unroll
        for (int j = 0; j < TILES; ++j) mma_16816(acc[q][j], frag, &wb[c][j][2 * s]);
      }
  #pragma unroll
  for (int q = 0; q < GROUPS; ++q) {
    if (q > 0) __syncthreads();  // the previous group's partial tiles have been read
    dense_mma_store(partial, acc[q], bias, act, y, row0 + NORM_DENSE_ROWS * q, col0, m, n);
  }
}

KERNEL void __launch_bounds__(NORM_DENSE_THREADS) layer_norm_dense_mma_k256(__half* normed, const __half* x, const __half* x_bias, float alpha, const __half* skip, const __half* gamma, const __half* beta, float eps, const __half* w, const __half* bias, int act, __half* y, int n) { layer_norm_dense_mma_body<256>(normed, x, x_bias, alpha, skip, gamma, beta, eps, w, bias, act, y, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) layer_norm_dense_mma_k512(__half* normed, const __half* x, const __half* x_bias, float alpha, const __half* skip, const __half* gamma, const __half* beta, float eps, const __half* w, const __half* bias, int act, __half* y, int n) { layer_norm_dense_mma_body<512>(normed, x, x_bias, alpha, skip, gamma, beta, eps, w, bias, act, y, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) layer_norm_dense_mma_k768(__half* normed, const __half* x, const __half* x_bias, float alpha, const __half* skip, const __half* gamma, const __half* beta, float eps, const __half* w, const __half* bias, int act, __half* y, int n) { layer_norm_dense_mma_body<768>(normed, x, x_bias, alpha, skip, gamma, beta, eps, w, bias, act, y, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) layer_norm_dense_mma_k1024(__half* normed, const __half* x, const __half* x_bias, float alpha, const __half* skip, const __half* gamma, const __half* beta, float eps, const __half* w, const __half* bias, int act, __half* y, int n) { layer_norm_dense_mma_body<1024>(normed, x, x_bias, alpha, skip, gamma, beta, eps, w, bias, act, y, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k256(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<256, 1>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k512(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<512, 1>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k768(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<768, 1>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k1024(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<1024, 1>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k1536(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<1536, 1>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k256_g4(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<256, 4>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k768_g4(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<768, 4>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(NORM_DENSE_THREADS) dense_mma_k1024_g2(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_mma_body<1024, 2>(x, w, bias, act, y, m, n); }
#endif
