// lc0rs kernels for residual-tower (convolutional) networks: fp16 storage, fp32 arithmetic.
// Activations are square-major per position, as the attention body's tokens: row
// position·64 + square, one column per channel, so a 1×1 convolution is a dense layer.

// The 3×3 neighbourhood of every square, zero off the board: out[row][tap·C + c] =
// x[row'][c] where row' is the square (rank + tap/3 − 1, file + tap%3 − 1) of the same
// position. One GEMM with the weights uploaded as [K][9·C] then gives the convolution.
// Channel counts that are multiples of 8 go 8 at a time (16-byte accesses).
KERNEL void conv_gather3x3(const __half* __restrict__ x, int channels, __half* __restrict__ out, int batch) {
  PRIOR_KERNELS_DONE();
  const int vector = (channels & 7) == 0 ? 8 : 1;
  const int groups = channels / vector;
  const long total = (long)batch * 64 * 9 * groups;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const int g = (int)(i % groups);
    const long rest = i / groups;
    const int tap = (int)(rest % 9);
    const long row = rest / 9;
    const int s = (int)(row % 64);
    const long position = row / 64;
    const int r = s / 8 + tap / 3 - 1, f = s % 8 + tap % 3 - 1;
    const bool inside = r >= 0 && r < 8 && f >= 0 && f < 8;
    __half* dst = out + row * 9 * channels + tap * channels + g * vector;
    const __half* src = x + (position * 64 + (inside ? r * 8 + f : 0)) * channels + g * vector;
    if (vector == 8) {
      if (inside) {
        copy8(dst, src);
      } else {
        float zeros[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        store8(dst, zeros);
      }
    } else {
      dst[0] = inside ? src[0] : __float2half(0.f);
    }
  }
}

// The end of a residual block without squeeze-excitation: x = act(y + bias + x) over
// [rows][cols] (bias[cols]: the second convolution's).
KERNEL void bias_residual_act(const __half* __restrict__ y, const __half* __restrict__ bias, __half* __restrict__ x,
                              long rows, int cols, int act) {
  PRIOR_KERNELS_DONE();
  const long total = rows * cols;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const float v = __half2float(y[i]) + __half2float(bias[i % cols]) + __half2float(x[i]);
    x[i] = __float2half(activate(v, act));
  }
}

// Positions whose squeeze-excitation gates one block computes at most (`se_gates`): each weight
// is then read once for all of them instead of once a position (T78's 96 KB of fc weights
// against its 1 KB of means a position).
#define SE_POSITIONS 8

// The most threads a block of the squeeze-excitation kernels takes (`se_residual`,
// `se_gates_of_means`, `winograd_se_board`): their launch bounds, so that the compilers keep
// their registers within what a block of 1024 threads may have (64 a thread on NVIDIA), and a
// launch never fails for want of them.
#define SE_THREADS 1024

// STEP weights from `src` (8: 16 bytes, aligned) as floats.
template <int STEP>
static __device__ __forceinline__ void se_weights(const __half* src, float w[STEP]) {
  if constexpr (STEP == 8) {
    load8(src, w);
  } else {
    w[0] = __half2float(src[0]);
  }
}

// sums[p] += Σₑ w[e] · x[p·width + e] for the block's positions.
template <int STEP>
static __device__ __forceinline__ void se_accumulate(float sums[SE_POSITIONS], const float w[STEP], const float* x,
                                                     int width, int positions) {
#pragma unroll
  for (int p = 0; p < SE_POSITIONS; ++p) {
    if (p < positions) {
#pragma unroll
      for (int e = 0; e < STEP; ++e) sums[p] += w[e] * x[p * width + e];
    }
  }
}

// W1's outputs into `hidden`, STEP inputs a load (`se_gates`).
template <int STEP>
static __device__ void se_hidden(const float* pooled, float* hidden, int positions, int channels,
                                 const __half* __restrict__ w1, const __half* __restrict__ b1, int se, int act) {
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  const int warps = blockDim.x / WARP_SIZE;
  for (int first = 0; first < se; first += warps) {
    const int j = first + warp;
    float sums[SE_POSITIONS] = {};
    if (j < se) {
      const __half* row = w1 + (long)j * channels;
      for (int c = STEP * lane; c < channels; c += STEP * WARP_SIZE) {
        float w[STEP];
        se_weights<STEP>(row + c, w);
        se_accumulate<STEP>(sums, w, pooled + c, channels, positions);
      }
    }
#pragma unroll
    for (int p = 0; p < SE_POSITIONS; ++p) {
      const float total = warp_sum(sums[p]);
      if (lane == 0 && j < se && p < positions) hidden[p * se + j] = activate(total + __half2float(b1[j]), act);
    }
  }
}

// W2's outputs into gates[p·stride + k], STEP inputs a load (`se_gates`).
template <int STEP>
static __device__ void se_outputs(const float* hidden, int positions, float* gates, long stride, int channels,
                                  int se, const __half* __restrict__ w2, const __half* __restrict__ b2) {
  for (int k = threadIdx.x; k < 2 * channels; k += blockDim.x) {
    const __half* row = w2 + (long)k * se;
    float sums[SE_POSITIONS] = {};
    for (int j = 0; j < se; j += STEP) {
      float w[STEP];
      se_weights<STEP>(row + j, w);
      se_accumulate<STEP>(sums, w, hidden + j, se, positions);
    }
    const float bias = __half2float(b2[k]);
#pragma unroll
    for (int p = 0; p < SE_POSITIONS; ++p) {
      if (p < positions) gates[p * stride + k] = sums[p] + bias;
    }
  }
}

// Squeeze-excitation's gates for `positions` (≤ SE_POSITIONS) positions from their pooled
// channels (lc0's scale-and-bias form): h = act(W1·pooled + b1), gates = [γ; β] = W2·h + b2.
// W1 is [se][C], W2 [2C][se], row-major; `pooled` ([positions][C]) and `hidden`
// ([positions][se]) are the block's shared floats, `pooled` written before the call; position
// p's 2C gates go to gates[p·stride …]. Each of W1's outputs is one warp's dot products over the
// C inputs (every warp runs the same number of rounds, an output or none, so that the shuffles
// stay uniform over the block, as the emulator's fibers need); each of W2's 2C outputs, a dot
// product over only se inputs, is one thread's, so that all of them load at once instead of a
// warp's round after round. Rows whose widths are multiples of 8 load 16 bytes at a time (at
// batch 1 a load after each multiply-add was most of the kernel's time). Ends with the block
// synchronised.
static __device__ void se_gates(const float* pooled, float* hidden, int positions, float* gates, long stride,
                                int channels, const __half* __restrict__ w1, const __half* __restrict__ b1, int se,
                                const __half* __restrict__ w2, const __half* __restrict__ b2, int act) {
  __syncthreads();
  if ((channels & 7) == 0) {
    se_hidden<8>(pooled, hidden, positions, channels, w1, b1, se, act);
  } else {
    se_hidden<1>(pooled, hidden, positions, channels, w1, b1, se, act);
  }
  __syncthreads();
  if ((se & 7) == 0) {
    se_outputs<8>(hidden, positions, gates, stride, channels, se, w2, b2);
  } else {
    se_outputs<1>(hidden, positions, gates, stride, channels, se, w2, b2);
  }
  __syncthreads();
}

// The mean over a position's 64 squares of channel c of `y` (square-major, from `base`): the
// loads unrolled so that they are in flight together.
static __device__ __forceinline__ float square_mean(const __half* __restrict__ y, long base, int channels, int c) {
  float sum = 0.f;
#pragma unroll 16
  for (int s = 0; s < 64; ++s) sum += __half2float(y[base + (long)s * channels + c]);
  return sum / 64.f;
}

// The end of a residual block with squeeze-excitation, one block per position: v = y + bias
// (the second convolution's output), pooled = mean of v over the 64 squares, the gates of
// `se_gates`, then x = act(sigmoid(γ)·v + β + x). Dynamic shared memory: (C + se + 2C) floats.
KERNEL void __launch_bounds__(SE_THREADS) se_residual(const __half* __restrict__ y, const __half* __restrict__ bias, __half* __restrict__ x,
                        int channels, const __half* __restrict__ w1, const __half* __restrict__ b1, int se,
                        const __half* __restrict__ w2, const __half* __restrict__ b2, int act) {
  PRIOR_KERNELS_DONE();
  DYNAMIC_SHARED(float, shared);
  float* pooled = shared;
  float* hidden = pooled + channels;
  float* gates = hidden + se;
  const long base = (long)blockIdx.x * 64 * channels;
  for (int c = threadIdx.x; c < channels; c += blockDim.x) pooled[c] = square_mean(y, base, channels, c) + __half2float(bias[c]);
  se_gates(pooled, hidden, 1, gates, 2 * channels, channels, w1, b1, se, w2, b2, act);
  for (int i = threadIdx.x; i < 64 * channels; i += blockDim.x) {
    const int c = i % channels;
    const float v = __half2float(y[base + i]) + __half2float(bias[c]);
    const float scale = 1.f / (1.f + expf(-gates[c]));
    x[base + i] = __float2half(activate(scale * v + gates[channels + c] + __half2float(x[base + i]), act));
  }
}

// A policy head's fp16 outputs to the 1858 f32 logits: out[b][map[j]] = input[b·per_position + j]
// for every j < count with map[j] ≥ 0 (the convolution policy's planes through lc0's map, or
// the classical head's 1858 values through the identity).
KERNEL void policy_gather(const __half* __restrict__ input, int per_position, const i16* __restrict__ map, int count,
                          float* __restrict__ out, int batch) {
  PRIOR_KERNELS_DONE();
  const long total = (long)batch * count;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const long b = i / count;
    const int j = (int)(i % count);
    const int index = map[j];
    if (index >= 0) out[b * 1858 + index] = __half2float(input[b * per_position + j]);
  }
}
