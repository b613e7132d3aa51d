// lc0rs LayerNorm kernels (attention bodies): fp16 storage, fp32 statistics.

// v = act(input + bias)·alpha + skip for the 8 values from column c of the row at base (bias
// and skip may be null): what layer_norm normalises.
static __device__ __forceinline__ void pre_norm8(const __half* input, const __half* __restrict__ bias, int act,
                                                 float alpha, const __half* skip, long base, int c, float* v) {
  float e[8];
  load8(input + base + c, v);
  if (bias) {
    load8(bias + c, e);
    #pragma unroll
    for (int j = 0; j < 8; ++j) v[j] += e[j];
  }
  #pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = activate(v[j], act) * alpha;
  if (skip) {
    load8(skip + base + c, e);
    #pragma unroll
    for (int j = 0; j < 8; ++j) v[j] += e[j];
  }
}

// out = LN(act(input + bias)·alpha + skip) per row, fp32 statistics (biased variance).
// bias and skip may be null; out may alias skip or input. One block per row (at most 1024
// threads); dynamic shared memory holds the row as float (cols·4 bytes) unless the row fits in
// registers at one 8-value chunk per thread.
KERNEL void __launch_bounds__(1024) layer_norm(__half* out, const __half* input, const __half* __restrict__ bias, int act,
                       float alpha, const __half* skip, const __half* __restrict__ gamma,
                       const __half* __restrict__ beta, float eps, int cols) {
  PRIOR_KERNELS_DONE();
  DYNAMIC_SHARED(float, row);
  __shared__ float scratch[32];
  const long base = (long)blockIdx.x * cols;
  float sum = 0.f;
  const bool wide = (cols & 7) == 0;  // 16-byte loads and stores
  if (wide && cols <= 8 * (int)blockDim.x) {
    // One chunk per thread (smolgen's 6144- and 8192-wide rows at 1024 threads): the row stays
    // in registers, and gamma and beta load with it. At small batches the kernel is a chain of
    // memory waits, and theirs then overlaps the row's instead of following the two block sums.
    const int c = threadIdx.x * 8;
    const bool mine = c < cols;
    // gamma and beta stay fp16 until the end: 8 registers, not 16 (the 1,024-thread block allows
    // 64 a thread; sm_80 spilled with them as float).
    float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    __align__(16) __half2 g[4], b[4];
    if (mine) {
      copy16(g, gamma + c);
      copy16(b, beta + c);
      pre_norm8(input, bias, act, alpha, skip, base, c, v);
      #pragma unroll
      for (int j = 0; j < 8; ++j) sum += v[j];
    }
    const float mean = block_sum(sum, scratch) / cols;
    float var = 0.f;
    if (mine) {
      #pragma unroll
      for (int j = 0; j < 8; ++j) var += (v[j] - mean) * (v[j] - mean);
    }
    const float inv = rsqrtf(block_sum(var, scratch) / cols + eps);
    if (mine) {
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 gj = __half22float2(g[j]), bj = __half22float2(b[j]);
        v[2 * j] = (v[2 * j] - mean) * inv * gj.x + bj.x;
        v[2 * j + 1] = (v[2 * j + 1] - mean) * inv * gj.y + bj.y;
      }
      store8(out + base + c, v);
    }
    return;
  }
  if (wide) {
    for (int c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
      float v[8];
      pre_norm8(input, bias, act, alpha, skip, base, c, v);
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        row[c + j] = v[j];
        sum += v[j];
      }
    }
  } else {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = __half2float(input[base + c]);
      if (bias) v += __half2float(bias[c]);
      v = activate(v, act) * alpha;
      if (skip) v += __half2float(skip[base + c]);
      row[c] = v;
      sum += v;
    }
  }
  const float mean = block_sum(sum, scratch) / cols;
  float var = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = row[c] - mean;
    var += d * d;
  }
  const float inv = rsqrtf(block_sum(var, scratch) / cols + eps);
  if (wide) {
    for (int c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
      float g[8], b[8], v[8];
      load8(gamma + c, g);
      load8(beta + c, b);
      #pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = (row[c + j] - mean) * inv * g[j] + b[j];
      store8(out + base + c, v);
    }
    return;
  }
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    out[base + c] = __float2half((row[c] - mean) * inv * __half2float(gamma[c]) + __half2float(beta[c]));
  }
}

// out = LN((input + bias)·alpha + skip) for rows of a multiple of 8 values, at most
// 8·CHUNKS·WARP_SIZE: one warp per row, the row in registers (CHUNKS loads of 8 halves per lane),
// shuffles for the sums, no block barriers; blockDim.x / WARP_SIZE rows per block. CHUNKS is a
// template argument so that a 768-wide row holds 24 registers per lane, not 64 (occupancy); so
// is the activation ACT (identity or swish, smolgen's), so that no per-value switch keeps the row
// out of registers. Rows with other activations take layer_norm. EARLY (at most 4 chunks) loads
// gamma and beta with the row: where the grid has a block per SM at most (small batches), the
// kernel is a chain of memory waits and theirs then overlaps the row's instead of following the
// sums; elsewhere the registers they hold (68 instead of 48 at 3 chunks) cost occupancy.
template <int CHUNKS, int ACT, bool EARLY>
static __device__ void layer_norm_warp_body(__half* out, const __half* input, const __half* __restrict__ bias,
                                            float alpha, const __half* skip, const __half* __restrict__ gamma,
                                            const __half* __restrict__ beta, float eps, int rows, int cols) {
  const int lane = threadIdx.x % WARP_SIZE;
  const int row = blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;
  if (row >= rows) return;
  const int chunks = cols / 8;
  const long base = (long)row * cols;
  __align__(16) __half2 g[CHUNKS][4], b[CHUNKS][4];  // gamma and beta, packed
  #pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    const int c = (lane + i * WARP_SIZE) * 8;
    if (EARLY && c < cols) {
      copy16(g[i], gamma + c);
      copy16(b[i], beta + c);
    }
  }
  float v[CHUNKS][8];
  float sum = 0.f;
  #pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    const int c = (lane + i * WARP_SIZE) * 8;
    if (c < cols) {
      load8(input + base + c, v[i]);
      float extra[8];
      if (bias) {
        load8(bias + c, extra);
        #pragma unroll
        for (int j = 0; j < 8; ++j) v[i][j] += extra[j];
      }
      #pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = activate(v[i][j], ACT) * alpha;
      if (skip) {
        load8(skip + base + c, extra);
        #pragma unroll
        for (int j = 0; j < 8; ++j) v[i][j] += extra[j];
      }
      #pragma unroll
      for (int j = 0; j < 8; ++j) sum += v[i][j];
    }
  }
  const float mean = warp_sum(sum) / cols;
  float var = 0.f;
  #pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    if (lane + i * WARP_SIZE < chunks) {
      #pragma unroll
      for (int j = 0; j < 8; ++j) var += (v[i][j] - mean) * (v[i][j] - mean);
    }
  }
  const float inv = rsqrtf(warp_sum(var) / cols + eps);
  #pragma unroll
  for (int i = 0; i < CHUNKS; ++i) {
    const int c = (lane + i * WARP_SIZE) * 8;
    if (c < cols) {
      if (!EARLY) {
        copy16(g[i], gamma + c);
        copy16(b[i], beta + c);
      }
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 scale = __half22float2(g[i][j]), shift = __half22float2(b[i][j]);
        v[i][2 * j] = (v[i][2 * j] - mean) * inv * scale.x + shift.x;
        v[i][2 * j + 1] = (v[i][2 * j + 1] - mean) * inv * scale.y + shift.y;
      }
      store8(out + base + c, v[i]);
    }
  }
}

// A member of the warp LayerNorm family: the entry point layer_norm_warp_NAME, rows of at most
// CHUNKS chunks of 8 values a lane, activation ACT, gamma and beta loaded EARLY or not.
#define LAYER_NORM_WARP(NAME, CHUNKS, ACT, EARLY) \
  KERNEL void layer_norm_warp_##NAME(__half* out, const __half* input, const __half* __restrict__ bias, float alpha, \
                                     const __half* skip, const __half* __restrict__ gamma, \
                                     const __half* __restrict__ beta, float eps, int rows, int cols) { \
    PRIOR_KERNELS_DONE(); \
    layer_norm_warp_body<CHUNKS, ACT, EARLY>(out, input, bias, alpha, skip, gamma, beta, eps, rows, cols); \
  }
// A row width's members with gamma and beta loaded after the sums: layer_norm_warp_cN (identity)
// and layer_norm_warp_swish_cN.
#define LAYER_NORM_WARP_LATE(CHUNKS) \
  LAYER_NORM_WARP(c##CHUNKS, CHUNKS, ACT_IDENTITY, false) \
  LAYER_NORM_WARP(swish_c##CHUNKS, CHUNKS, ACT_SWISH, false)
// A row width's members with gamma and beta loaded with the row (at most 4 chunks, see
// layer_norm_warp_body): layer_norm_warp_early_cN and layer_norm_warp_swish_early_cN.
#define LAYER_NORM_WARP_EARLY(CHUNKS) \
  LAYER_NORM_WARP(early_c##CHUNKS, CHUNKS, ACT_IDENTITY, true) \
  LAYER_NORM_WARP(swish_early_c##CHUNKS, CHUNKS, ACT_SWISH, true)

// The family, one line a row width (in chunks of 8 values a lane). LAYER_NORM_WARP_WIDTHS in
// src/gpu/kernels/layer_norm.rs lists the same widths; a unit test compares the two.
LAYER_NORM_WARP_LATE(1) LAYER_NORM_WARP_EARLY(1)
LAYER_NORM_WARP_LATE(2) LAYER_NORM_WARP_EARLY(2)
LAYER_NORM_WARP_LATE(3) LAYER_NORM_WARP_EARLY(3)
LAYER_NORM_WARP_LATE(4) LAYER_NORM_WARP_EARLY(4)
LAYER_NORM_WARP_LATE(6)
LAYER_NORM_WARP_LATE(8)
