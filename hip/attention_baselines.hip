// lc0rs attention baselines: what `lc0rs attnbench` compares the attention kernels of
// attention.hip with. A naive attention (one thread per query, no shared memory), and the softmax
// of the unfused path (GEMM, softmax, GEMM: how lc0's backends without a fused kernel run it).
// Same inputs and outputs as attention.hip: Q, K, V read in place from the QKV output
// ([rows][3·d_model]: q | k | v), the smolgen bias [position][head][64][64] (may be null).

// One thread per (position, head, query), 64 per block (one head of one position): the scores in
// one pass over the keys with a running maximum (online softmax), Q and the output in registers,
// K and V read from global memory (the 64 threads of a block read the same key row: cached).
template <int DEPTH>
static __device__ void attention_naive_body(const __half* __restrict__ qkv, const __half* __restrict__ bias,
                                            __half* __restrict__ ctx, int heads) {
  const int q = threadIdx.x, h = blockIdx.x;
  const long b = blockIdx.y;
  const int d_model = heads * DEPTH, stride = 3 * d_model;
  const __half* rows = qkv + b * 64 * stride + h * DEPTH;
  const float scale = rsqrtf((float)DEPTH);
  float qv[DEPTH], out[DEPTH];
  #pragma unroll
  for (int j = 0; j < DEPTH; ++j) {
    qv[j] = __half2float(rows[q * stride + j]) * scale;
    out[j] = 0.f;
  }
  float mx = -3.0e38f, sum = 0.f;
  for (int k = 0; k < 64; ++k) {
    const __half* key = rows + k * stride + d_model;
    float s = bias ? __half2float(bias[((b * heads + h) * 64 + q) * 64 + k]) : 0.f;
    #pragma unroll
    for (int j = 0; j < DEPTH; ++j) s = fmaf(qv[j], __half2float(key[j]), s);
    const float new_mx = fmaxf(mx, s);
    const float rescale = expf(mx - new_mx), p = expf(s - new_mx);
    sum = sum * rescale + p;
    const __half* value = key + d_model;
    #pragma unroll
    for (int j = 0; j < DEPTH; ++j) out[j] = fmaf(p, __half2float(value[j]), out[j] * rescale);
    mx = new_mx;
  }
  __half* dst = ctx + (b * 64 + q) * d_model + h * DEPTH;
  #pragma unroll
  for (int j = 0; j < DEPTH; ++j) dst[j] = __float2half_rn(out[j] / sum);
}

KERNEL void attention_naive_d16(const __half* qkv, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  attention_naive_body<16>(qkv, bias, ctx, heads);
}
KERNEL void attention_naive_d32(const __half* qkv, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  attention_naive_body<32>(qkv, bias, ctx, heads);
}
KERNEL void attention_naive_d64(const __half* qkv, const __half* bias, __half* ctx, int heads) {
  PRIOR_KERNELS_DONE();
  attention_naive_body<64>(qkv, bias, ctx, heads);
}

// One row of softmax_rows64, lane `lane` of its 32.
static __device__ __forceinline__ void softmax_row64(__half* row, const __half* bias, int lane) {
  __half2* s = (__half2*)row + lane;
  float2 v = __half22float2(*s);
  if (bias) {
    const float2 b = __half22float2(((const __half2*)bias)[lane]);
    v.x += b.x;
    v.y += b.y;
  }
  float mx = fmaxf(v.x, v.y);
  #pragma unroll
  for (int m = 16; m > 0; m /= 2) mx = fmaxf(mx, SHFL_XOR(mx, m));
  v.x = expf(v.x - mx);
  v.y = expf(v.y - mx);
  float sum = v.x + v.y;
  #pragma unroll
  for (int m = 16; m > 0; m /= 2) sum += SHFL_XOR(sum, m);
  *s = __floats2half2_rn(v.x / sum, v.y / sum);
}

// The unfused path's middle step, in place over scores already scaled by 1/sqrt(depth)
// ([rows][64], row r = (position·heads + head)·64 + query): add the smolgen bias (same layout,
// may be null), softmax in fp32, probabilities back as fp16. 32 lanes per row, two values each
// (shuffles within 32 lanes: wave32 and wave64 alike), rows strided over the grid (blocks of a
// multiple of 32 threads; the 32 lanes of a row take the same rows, so they shuffle together).
KERNEL void softmax_rows64(__half* scores, const __half* __restrict__ bias, long rows) {
  PRIOR_KERNELS_DONE();
  const int lane = threadIdx.x % 32;
  const long step = (long)gridDim.x * blockDim.x / 32;
  for (long row = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < rows; row += step) {
    softmax_row64(scores + row * 64, bias ? bias + row * 64 : nullptr, lane);
  }
}
