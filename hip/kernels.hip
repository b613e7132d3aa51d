// lc0rs kernels every network family uses: 16-byte fp16 loads and stores, the input planes as
// rows, dense-layer helpers. fp16 storage, fp32 arithmetic. Shapes: tokens (or squares) are rows
// (position·64 + square), channels are columns, row-major.
// 8 halves (16 bytes) at a time; both addresses 16-byte aligned.
static __device__ __forceinline__ void copy8(__half* dst, const __half* src) { copy16(dst, src); }

static __device__ __forceinline__ void load8(const __half* src, float* out) {
  __align__(16) __half2 h[4];
  copy16(h, src);
  #pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

static __device__ __forceinline__ void store8(__half* dst, const float* in) {
  __align__(16) __half2 h[4];
  #pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(in[2 * i], in[2 * i + 1]);
  copy16(dst, h);
}

// Tokens for the embedding: the 112 input planes of each square followed by `extra_width`
// values: PE_MAP's positional encoding (extra_batch_stride 0, [64][64]) or PE_DENSE's
// preprocessed features ([batch][64·extra_width]).
KERNEL void expand_tokens(const u64* __restrict__ masks, const float* __restrict__ values,
                          const __half* __restrict__ extra, int extra_width, int extra_batch_stride,
                          __half* __restrict__ tokens, int batch) {
  PRIOR_KERNELS_DONE();
  const int width = 112 + extra_width;
  const long total = (long)batch * 64 * width;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const int c = (int)(i % width);
    const long row = i / width;
    const int s = (int)(row % 64), b = (int)(row / 64);
    float v;
    if (c < 112) {
      v = ((masks[b * 112 + c] >> s) & 1ull) ? values[b * 112 + c] : 0.f;
    } else {
      v = __half2float(extra[(long)b * extra_batch_stride + s * extra_width + (c - 112)]);
    }
    tokens[i] = __float2half(v);
  }
}

// PE_DENSE's input: the current board's 12 piece planes, square-major ([batch][64·12]).
KERNEL void pe_dense_input(const u64* __restrict__ masks, const float* __restrict__ values,
                           __half* __restrict__ out, int batch) {
  PRIOR_KERNELS_DONE();
  const int total = batch * 64 * 12;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % 12, s = (i / 12) % 64, b = i / (64 * 12);
    out[i] = __float2half(((masks[b * 112 + c] >> s) & 1ull) ? values[b * 112 + c] : 0.f);
  }
}

// x = act(x + bias) over [rows][cols]; bias may be null. Rows of a multiple of 8 values go 8 at a
// time (16-byte accesses); others one by one.
KERNEL void bias_activation(__half* __restrict__ x, const __half* __restrict__ bias, long rows, int cols, int act) {
  PRIOR_KERNELS_DONE();
  const long total = rows * cols;
  const long step = (long)gridDim.x * blockDim.x;
  if ((cols & 7) == 0) {
    // Chunk counts fit 32 bits (cheaper index arithmetic than 64-bit division).
    const unsigned chunks = (unsigned)(total / 8), row_chunks = (unsigned)(cols / 8);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks; i += (unsigned)step) {
      float v[8];
      load8(x + 8L * i, v);
      if (bias) {
        float b[8];
        load8(bias + (i % row_chunks) * 8, b);
        #pragma unroll
        for (int j = 0; j < 8; ++j) v[j] += b[j];
      }
      #pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = activate(v[j], act);
      store8(x + 8L * i, v);
    }
    return;
  }
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += step) {
    float v = __half2float(x[i]);
    if (bias) v += __half2float(bias[i % cols]);
    x[i] = __float2half(activate(v, act));
  }
}

// y[r][o] = act(Σ_k x[r][k]·W[o][k] + bias[o]) for at most DENSE_ROWS_MAX rows: the per-position
// dense layers (smolgen, value and moves-left heads) at small batches, where a library GEMM is a
// long K loop on a few blocks. `splits` warps (a power of two dividing the block's warps) share
// an output: each reads its share of the weight row once (16-byte loads, one per lane per 256
// values) and applies it to every row; partial sums meet in shared memory. fp32 sums. k and ldx
// multiples of 8; bias may be null.
#define DENSE_ROWS_MAX 4
KERNEL void dense_rows(const __half* __restrict__ x, int ldx, const __half* __restrict__ w,
                       const __half* __restrict__ bias, __half* __restrict__ y, int ldy, int rows, int n,
                       int k, int act, int splits) {
  __shared__ float partial[32][DENSE_ROWS_MAX];
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  const int outputs_per_block = (blockDim.x / WARP_SIZE) / splits;
  const int o = blockIdx.x * outputs_per_block + warp / splits, part = warp % splits;
  // The lane's first weight chunk (all of its share for smolgen's and the heads' layers) loads
  // before the wait: weights are no kernel's output, and with programmatic launch their DRAM
  // round trip overlaps the previous kernel.
  const __half* row = w + (long)o * k;
  const int first = (part * WARP_SIZE + lane) * 8;
  float wv[8];
  if (o < n && first < k) load8(row + first, wv);
  PRIOR_KERNELS_DONE();
  float acc[DENSE_ROWS_MAX];
  #pragma unroll
  for (int r = 0; r < DENSE_ROWS_MAX; ++r) acc[r] = 0.f;
  if (o < n) {
    for (int c = first; c < k; c += splits * WARP_SIZE * 8) {
      if (c != first) load8(row + c, wv);
      #pragma unroll
      for (int r = 0; r < DENSE_ROWS_MAX; ++r) {
        if (r < rows) {
          float xv[8];
          load8(x + (long)r * ldx + c, xv);
          #pragma unroll
          for (int j = 0; j < 8; ++j) acc[r] += wv[j] * xv[j];
        }
      }
    }
  }
  #pragma unroll
  for (int r = 0; r < DENSE_ROWS_MAX; ++r) {
    if (r < rows) {
      const float sum = warp_sum(acc[r]);
      if (lane == 0) partial[warp][r] = sum;
    }
  }
  __syncthreads();
  if (o < n && part == 0 && lane < rows) {
    float sum = bias ? __half2float(bias[o]) : 0.f;
    for (int s = 0; s < splits; ++s) sum += partial[warp + s][lane];
    y[(long)lane * ldy + o] = __float2half(activate(sum, act));
  }
}

// Input gating: x[s][c] = x[s][c]·mult[s][c] + add[s][c] for every position's 64 squares s
// (mult and add uploaded square-major, so that x, mult and add are all read in order). Rows of a
// multiple of 8 values go 8 at a time (16-byte accesses); others one by one.
KERNEL void input_gating(__half* __restrict__ x, const __half* __restrict__ mult, const __half* __restrict__ add,
                         long rows, int cols) {
  PRIOR_KERNELS_DONE();
  const long total = rows * cols, per_position = 64L * cols;
  const long step = (long)gridDim.x * blockDim.x;
  if ((cols & 7) == 0) {
    // Chunk counts fit 32 bits (a 64-bit modulo per chunk made this kernel compute-bound).
    const unsigned chunks = (unsigned)(total / 8), per_chunks = (unsigned)(per_position / 8);
    for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < chunks; k += (unsigned)step) {
      const unsigned g = k % per_chunks;
      float v[8], m[8], a[8];
      load8(x + 8L * k, v);
      load8(mult + 8L * g, m);
      load8(add + 8L * g, a);
      #pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = v[j] * m[j] + a[j];
      store8(x + 8L * k, v);
    }
    return;
  }
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += step) {
    const long g = i % per_position;
    x[i] = __float2half(__half2float(x[i]) * __half2float(mult[g]) + __half2float(add[g]));
  }
}
