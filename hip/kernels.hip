// lc0rs kernels for attention-body networks: fp16 storage, fp32 arithmetic.
// Shapes: tokens are rows (position·64 + square), channels are columns, row-major.

// Tokens for the embedding: the 112 input planes of each square followed by `extra_width`
// values: PE_MAP's positional encoding (extra_batch_stride 0, [64][64]) or PE_DENSE's
// preprocessed features ([batch][64·extra_width]).
KERNEL void expand_tokens(const u64* __restrict__ masks, const float* __restrict__ values,
                          const __half* __restrict__ extra, int extra_width, int extra_batch_stride,
                          __half* __restrict__ tokens, int batch) {
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
  const int total = batch * 64 * 12;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c = i % 12, s = (i / 12) % 64, b = i / (64 * 12);
    out[i] = __float2half(((masks[b * 112 + c] >> s) & 1ull) ? values[b * 112 + c] : 0.f);
  }
}

// x = act(x + bias) over [rows][cols]; bias may be null.
KERNEL void bias_activation(__half* __restrict__ x, const __half* __restrict__ bias, long rows, int cols, int act) {
  const long total = rows * cols;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    float v = __half2float(x[i]);
    if (bias) v += __half2float(bias[i % cols]);
    x[i] = __float2half(activate(v, act));
  }
}

// Input gating: x[s][c] = x[s][c]·mult[c·64 + s] + add[c·64 + s].
KERNEL void input_gating(__half* __restrict__ x, const __half* __restrict__ mult, const __half* __restrict__ add,
                         long rows, int cols) {
  const long total = rows * cols;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const int c = (int)(i % cols), s = (int)((i / cols) % 64);
    x[i] = __float2half(__half2float(x[i]) * __half2float(mult[c * 64 + s]) + __half2float(add[c * 64 + s]));
  }
}

// out = LN(act(in + bias)·alpha + skip) per row, fp32 statistics (biased variance).
// bias and skip may be null; out may alias skip or in. One block per row; dynamic shared
// memory holds the row as float (cols·4 bytes).
KERNEL void layer_norm(__half* out, const __half* in, const __half* __restrict__ bias, int act,
                       float alpha, const __half* skip, const __half* __restrict__ gamma,
                       const __half* __restrict__ beta, float eps, int cols) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const long base = (long)blockIdx.x * cols;
  float sum = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = __half2float(in[base + c]);
    if (bias) v += __half2float(bias[c]);
    v = activate(v, act) * alpha;
    if (skip) v += __half2float(skip[base + c]);
    row[c] = v;
    sum += v;
  }
  const float mean = block_sum(sum, scratch) / cols;
  float var = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = row[c] - mean;
    var += d * d;
  }
  const float inv = rsqrtf(block_sum(var, scratch) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    out[base + c] = __float2half((row[c] - mean) * inv * __half2float(gamma[c]) + __half2float(beta[c]));
  }
}

// Attention for 64 tokens, one block of 64 threads per (head, position), one thread per query.
// Q, K, V are read in place from the fused QKV output ([rows][3·d_model]: q | k | v); the
// smolgen bias ([position][head][64][64], may be null) is added after the 1/sqrt(depth) scale;
// softmax in fp32; the context goes to ctx ([rows][d_model]). Portable: no tensor cores.
template <int DEPTH>
static __device__ void attention_body(const __half* __restrict__ qkv, const __half* __restrict__ bias,
                                      __half* __restrict__ ctx, int heads) {
  __shared__ float ks[64][DEPTH + 1];
  __shared__ float vs[64][DEPTH + 1];
  const int h = blockIdx.x, b = blockIdx.y, q = threadIdx.x;
  const int d_model = heads * DEPTH, stride = 3 * d_model;
  const long row0 = (long)b * 64;
  for (int i = threadIdx.x; i < 64 * DEPTH; i += blockDim.x) {
    const int t = i / DEPTH, j = i % DEPTH;
    const long at = (row0 + t) * stride + h * DEPTH + j;
    ks[t][j] = __half2float(qkv[at + d_model]);
    vs[t][j] = __half2float(qkv[at + 2 * d_model]);
  }
  float qv[DEPTH];
  const float scale = rsqrtf((float)DEPTH);
  #pragma unroll
  for (int j = 0; j < DEPTH; ++j) qv[j] = __half2float(qkv[(row0 + q) * stride + h * DEPTH + j]) * scale;
  __syncthreads();
  float p[64];
  float mx = -3.0e38f;
  const __half* brow = bias ? bias + (((long)b * heads + h) * 64 + q) * 64 : 0;
  #pragma unroll
  for (int k = 0; k < 64; ++k) {
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < DEPTH; ++j) s += qv[j] * ks[k][j];
    if (brow) s += __half2float(brow[k]);
    p[k] = s;
    mx = fmaxf(mx, s);
  }
  float sum = 0.f;
  #pragma unroll
  for (int k = 0; k < 64; ++k) {
    p[k] = expf(p[k] - mx);
    sum += p[k];
  }
  const float inv = 1.f / sum;
  #pragma unroll
  for (int j = 0; j < DEPTH; ++j) {
    float acc = 0.f;
    #pragma unroll
    for (int k = 0; k < 64; ++k) acc += p[k] * vs[k][j];
    ctx[(row0 + q) * d_model + h * DEPTH + j] = __float2half(acc * inv);
  }
}

KERNEL void attention_d16(const __half* qkv, const __half* bias, __half* ctx, int heads) { attention_body<16>(qkv, bias, ctx, heads); }
KERNEL void attention_d32(const __half* qkv, const __half* bias, __half* ctx, int heads) { attention_body<32>(qkv, bias, ctx, heads); }
KERNEL void attention_d64(const __half* qkv, const __half* bias, __half* ctx, int heads) { attention_body<64>(qkv, bias, ctx, heads); }

// The attention policy's finish, one block per position: promotion logits from the keys of the
// rank-8 squares and `ppo` ([4][dp], row 3 the knight/base offset), then the 4288 raw values
// mapped to the 1858 outputs (fp32). logits: [batch][64][64] (already scaled); keys: row
// stride key_stride.
KERNEL void policy_finish(const __half* __restrict__ logits, const __half* __restrict__ keys, int key_stride,
                          const __half* __restrict__ ppo, int dp, const i16* __restrict__ map,
                          float* __restrict__ out) {
  __shared__ float offsets[4][8];
  const int b = blockIdx.x;
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  const int warps = blockDim.x / WARP_SIZE;
  for (int pair = warp; pair < 32; pair += warps) {
    const int c = pair / 8, t = pair % 8;
    const __half* key = keys + ((long)b * 64 + 56 + t) * key_stride;
    float s = 0.f;
    for (int j = lane; j < dp; j += WARP_SIZE) s += __half2float(key[j]) * __half2float(ppo[c * dp + j]);
    s = warp_sum(s);
    if (lane == 0) offsets[c][t] = s;
  }
  __syncthreads();
  const __half* lg = logits + (long)b * 4096;
  for (int i = threadIdx.x; i < 4288; i += blockDim.x) {
    const int index = map[i];
    if (index < 0) continue;
    float v;
    if (i < 4096) {
      v = __half2float(lg[i]);
    } else {
      const int r = i - 4096, f = r / 24, t = (r % 24) / 3, c = r % 3;
      v = __half2float(lg[(48 + f) * 64 + 56 + t]) + offsets[c][t] + offsets[3][t];
    }
    out[(long)b * 1858 + index] = v;
  }
}

// Value and moves-left finish: out[b] = (Q, D, M). WDL: softmax of 3 logits, Q = W − L;
// otherwise Q = tanh(value), D = 0. M = relu(mlh) or 0 without a head.
KERNEL void value_finish(const __half* __restrict__ value, int wdl, const __half* __restrict__ mlh,
                         float* __restrict__ out, int batch) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float q, d;
  if (wdl) {
    const float w = __half2float(value[b * 3]), dr = __half2float(value[b * 3 + 1]), l = __half2float(value[b * 3 + 2]);
    const float mx = fmaxf(w, fmaxf(dr, l));
    const float ew = expf(w - mx), ed = expf(dr - mx), el = expf(l - mx);
    const float inv = 1.f / (ew + ed + el);
    q = (ew - el) * inv;
    d = ed * inv;
  } else {
    q = tanhf(__half2float(value[b]));
    d = 0.f;
  }
  const float m = mlh ? fmaxf(__half2float(mlh[b]), 0.f) : 0.f;
  out[b * 3] = q;
  out[b * 3 + 1] = d;
  out[b * 3 + 2] = m;
}
