// lc0rs output-head kernels: the attention policy's map to the 1858 logits (attention bodies
// and towers with an attention policy), the value / moves-left finish (every network), and the
// gather of the outputs a caller picked for the copy back.

// The attention policy's finish: the 4288 raw values of position blockIdx.x mapped to the
// 1858 outputs (fp32), blockDim.x raw values per block along y, so that a small batch still
// spreads over many blocks. The blocks that hold promotions (raw index >= 4096) first compute
// the promotion offsets from the keys of the rank-8 squares and `ppo` ([4][dp], row 3 the
// knight/base offset). logits: [batch][64][64] (already scaled); keys: row stride key_stride.
KERNEL void policy_finish(const __half* __restrict__ logits, const __half* __restrict__ keys, int key_stride,
                          const __half* __restrict__ ppo, int dp, const i16* __restrict__ map,
                          float* __restrict__ out) {
  PRIOR_KERNELS_DONE();
  __shared__ float offsets[4][8];
  const long b = blockIdx.x;
  const int i = blockIdx.y * blockDim.x + threadIdx.x;
  if ((blockIdx.y + 1) * blockDim.x > 4096) {
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int warps = blockDim.x / WARP_SIZE;
    for (int pair = warp; pair < 32; pair += warps) {
      const int c = pair / 8, t = pair % 8;
      const __half* key = keys + (b * 64 + 56 + t) * key_stride;
      const __half* p = ppo + c * dp;
      float s = 0.f;
      if ((dp & 7) == 0) {
        // 16-byte loads (rows start at multiples of 8 halves): a 768-wide dot in 3 steps.
        for (int j = lane * 8; j < dp; j += WARP_SIZE * 8) {
          float k8[8], p8[8];
          load8(key + j, k8);
          load8(p + j, p8);
          #pragma unroll
          for (int e = 0; e < 8; ++e) s += k8[e] * p8[e];
        }
      } else {
        for (int j = lane; j < dp; j += WARP_SIZE) s += __half2float(key[j]) * __half2float(p[j]);
      }
      s = warp_sum(s);
      if (lane == 0) offsets[c][t] = s;
    }
    __syncthreads();
  }
  if (i >= 4288) return;
  const int index = map[i];
  if (index < 0) return;
  const __half* lg = logits + b * 4096;
  float v;
  if (i < 4096) {
    v = __half2float(lg[i]);
  } else {
    const int r = i - 4096, f = r / 24, t = (r % 24) / 3, c = r % 3;
    v = __half2float(lg[(48 + f) * 64 + 56 + t]) + offsets[c][t] + offsets[3][t];
  }
  out[b * 1858 + index] = v;
}

// Value and moves-left finish: out[b] = (Q, D, M). WDL: softmax of 3 logits, Q = W − L;
// otherwise Q = tanh(value), D = 0. M = relu(mlh) or 0 without a head.
KERNEL void value_finish(const __half* __restrict__ value, int wdl, const __half* __restrict__ mlh,
                         float* __restrict__ out, int batch) {
  PRIOR_KERNELS_DONE();
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

// The outputs of a pass over `size` positions that a caller reads, gathered into one array for
// one small copy back instead of every logit: the first `batch` positions' Q, D and M
// (`outputs`' first [batch][3] f32), then the picked logits in the picks' order, pick i being
// logit indices[i] of position p where ends[p − 1] ≤ i < ends[p] (ends[-1] = 0; `total` =
// ends[batch − 1]). `outputs` is the pass's: [size][3] f32, then [size][1858] f32 logits.
KERNEL void gather_picked(const float* __restrict__ outputs, int size, int batch, const unsigned* __restrict__ ends,
                          const unsigned short* __restrict__ indices, int total, float* __restrict__ out) {
  PRIOR_KERNELS_DONE();
  const long finished = 3L * batch, count = finished + total;
  const float* policy = outputs + 3L * size;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < count; i += (long)gridDim.x * blockDim.x) {
    if (i < finished) {
      out[i] = outputs[i];
      continue;
    }
    const unsigned pick = (unsigned)(i - finished);
    int low = 0, high = batch - 1;  // the first position whose picks end past this one
    while (low < high) {
      const int middle = (low + high) / 2;
      if (ends[middle] > pick) {
        high = middle;
      } else {
        low = middle + 1;
      }
    }
    out[i] = policy[(long)low * 1858 + indices[pick]];
  }
}
