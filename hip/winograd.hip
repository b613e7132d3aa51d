// lc0rs' 3×3 convolutions as Winograd F(m×m, 3×3), m = 2 or 4: fp16 storage, fp32 arithmetic.
// A board is (8/m)² output tiles of m × m squares; tile t covers ranks m·(t / (8/m)) … + m − 1
// and files m·(t % (8/m)) … + m − 1, and reads the (m+2)² squares around them (zero off the
// board). With the transformed input V = Bᵀ·d·B and weights U = G·g·Gᵀ (uploaded as
// [points][K][C]), each point ξ is one GEMM M_ξ[tile][K] = V_ξ[tile][C] · U_ξ[K][C]ᵀ, and the
// output tile is Aᵀ·M·A. Transformed tensors are point-major: element (ξ, board·tiles + t, c)
// at (ξ · tiles·batch + board·tiles + t) · C + c, so that every point's GEMM is a plain
// row-major matrix. Activations are square-major as everywhere in the tower: row
// board·64 + square, column c. The matrices (and G, applied on the host) are in
// src/backend/executor/tower/weights.rs's words: F(2×2) on the points 0, ±1, ∞; F(4×4) on
// 0, ±1/2, ±2, ∞, whose fp16 error is two thirds of the usual 0, ±1, ±2's.
//
// Each thread owns one channel of one board: it reads or writes a channel's 64 squares and its
// tiles' points, with neighbouring threads on neighbouring channels (coalesced accesses).

template <int M>
struct Winograd;

template <>
struct Winograd<2> {
  // Bᵀ·d for one column or row of the input tile.
  static __device__ __forceinline__ void bt(const float d[4], float t[4]) {
    t[0] = d[0] - d[2];
    t[1] = d[1] + d[2];
    t[2] = d[2] - d[1];
    t[3] = d[1] - d[3];
  }
  // Aᵀ·m for one column or row of the products.
  static __device__ __forceinline__ void at(const float m[4], float o[2]) {
    o[0] = m[0] + m[1] + m[2];
    o[1] = m[1] - m[2] - m[3];
  }
};

template <>
struct Winograd<4> {
  static __device__ __forceinline__ void bt(const float d[6], float t[6]) {
    t[0] = d[0] - 4.25f * d[2] + d[4];
    t[1] = -2.f * d[1] - 4.f * d[2] + 0.5f * d[3] + d[4];
    t[2] = 2.f * d[1] - 4.f * d[2] - 0.5f * d[3] + d[4];
    t[3] = -0.5f * d[1] - 0.25f * d[2] + 2.f * d[3] + d[4];
    t[4] = 0.5f * d[1] - 0.25f * d[2] - 2.f * d[3] + d[4];
    t[5] = d[1] - 4.25f * d[3] + d[5];
  }
  static __device__ __forceinline__ void at(const float m[6], float o[4]) {
    o[0] = m[0] + m[1] + m[2] + m[3] + m[4];
    o[1] = 0.5f * (m[1] - m[2]) + 2.f * (m[3] - m[4]);
    o[2] = 0.25f * (m[1] + m[2]) + 4.f * (m[3] + m[4]);
    o[3] = 0.125f * (m[1] - m[2]) + 8.f * (m[3] - m[4]) + m[5];
  }
};

// The points of channel c of `board` from its 64 squares, into `v` (`tiles`: of the batch).
template <int M>
static __device__ __forceinline__ void winograd_points_from_board(const float board_values[64], __half* __restrict__ v,
                                                                  long tiles, int channels, long board, int c) {
  constexpr int N = M + 2, SIDE = 8 / M;
#pragma unroll
  for (int tile = 0; tile < SIDE * SIDE; ++tile) {
    const int rank0 = M * (tile / SIDE) - 1, file0 = M * (tile % SIDE) - 1;
    float columns[N][N];  // columns[b] = Bᵀ · (column b of the neighbourhood)
#pragma unroll
    for (int b = 0; b < N; ++b) {
      float d[N];
#pragma unroll
      for (int a = 0; a < N; ++a) {
        const int r = rank0 + a, f = file0 + b;
        d[a] = (r >= 0 && r < 8 && f >= 0 && f < 8) ? board_values[r * 8 + f] : 0.f;
      }
      Winograd<M>::bt(d, columns[b]);
    }
    __half* out = v + (board * SIDE * SIDE + tile) * channels + c;
#pragma unroll
    for (int a = 0; a < N; ++a) {
      float row[N], t[N];
#pragma unroll
      for (int b = 0; b < N; ++b) row[b] = columns[b][a];
      Winograd<M>::bt(row, t);
#pragma unroll
      for (int b = 0; b < N; ++b) out[(long)(a * N + b) * tiles * channels] = __float2half(t[b]);
    }
  }
}

// Channel c of `board`'s 64 output squares from its tiles' points in `m` (Aᵀ·M·A).
template <int M>
static __device__ __forceinline__ void winograd_board_from_points(const __half* __restrict__ m, long tiles,
                                                                  int channels, long board, int c,
                                                                  float board_values[64]) {
  constexpr int N = M + 2, SIDE = 8 / M;
#pragma unroll
  for (int tile = 0; tile < SIDE * SIDE; ++tile) {
    const __half* in = m + (board * SIDE * SIDE + tile) * channels + c;
    float columns[N][M];  // columns[b] = Aᵀ · (column b of the tile's points)
#pragma unroll
    for (int b = 0; b < N; ++b) {
      float p[N];
#pragma unroll
      for (int a = 0; a < N; ++a) p[a] = __half2float(in[(long)(a * N + b) * tiles * channels]);
      Winograd<M>::at(p, columns[b]);
    }
    const int rank0 = M * (tile / SIDE), file0 = M * (tile % SIDE);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float row[N], o[M];
#pragma unroll
      for (int b = 0; b < N; ++b) row[b] = columns[b][i];
      Winograd<M>::at(row, o);
#pragma unroll
      for (int j = 0; j < M; ++j) board_values[(rank0 + i) * 8 + file0 + j] = o[j];
    }
  }
}

// The input transform of a convolution's input x ([batch·64][C]) into v ([points][tiles][C]).
template <int M>
static __device__ void winograd_input(const __half* __restrict__ x, int channels, __half* __restrict__ v, int batch) {
  const long tiles = (64L / (M * M)) * batch, total = (long)batch * channels;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const int c = (int)(i % channels);
    const long board = i / channels;
    float values[64];
#pragma unroll
    for (int s = 0; s < 64; ++s) values[s] = __half2float(x[(board * 64 + s) * channels + c]);
    winograd_points_from_board<M>(values, v, tiles, channels, board, c);
  }
}

// The output transform of a convolution's products m ([points][tiles][K]), then
// y = act(out + bias (+ residual)): written to `out` ([batch·64][K]) where given, and
// transformed into `v` (the next convolution's input points) where given. `residual` may be
// `out` itself (a block's skip, updated in place: each thread reads its values before it
// writes them).
template <int M>
static __device__ void winograd_output(const __half* __restrict__ m, int channels, const __half* __restrict__ bias,
                                       const __half* residual, int act, __half* out, __half* __restrict__ v, int batch) {
  const long tiles = (64L / (M * M)) * batch, total = (long)batch * channels;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const int c = (int)(i % channels);
    const long board = i / channels;
    float values[64];
    winograd_board_from_points<M>(m, tiles, channels, board, c, values);
    const float b = __half2float(bias[c]);
#pragma unroll
    for (int s = 0; s < 64; ++s) {
      const long at = (board * 64 + s) * channels + c;
      float y = values[s] + b;
      if (residual) y += __half2float(residual[at]);
      y = activate(y, act);
      if (out) out[at] = __float2half(y);
      values[s] = y;
    }
    if (v) winograd_points_from_board<M>(values, v, tiles, channels, board, c);
  }
}

// A residual block's end with squeeze-excitation, one block per position: y = out + bias (the
// second convolution's output transform, kept in `scratch`, [batch·64][C]), pooled = mean of
// y over the squares, the gates of `se_gates`, then x = act(sigmoid(γ)·y + β + x), and x
// transformed into `v` (the next block's first convolution) where given. Dynamic shared
// memory: (C + se + 2C) floats.
template <int M>
static __device__ void winograd_se_output(const __half* __restrict__ m, int channels, const __half* __restrict__ bias,
                                          __half* __restrict__ scratch, __half* __restrict__ x,
                                          const __half* __restrict__ w1, const __half* __restrict__ b1, int se,
                                          const __half* __restrict__ w2, const __half* __restrict__ b2, int act,
                                          __half* __restrict__ v, int batch) {
  DYNAMIC_SHARED(float, shared);
  float* pooled = shared;
  float* hidden = pooled + channels;
  float* gates = hidden + se;
  const long board = blockIdx.x, tiles = (64L / (M * M)) * batch;
  for (int c = threadIdx.x; c < channels; c += blockDim.x) {
    float values[64];
    winograd_board_from_points<M>(m, tiles, channels, board, c, values);
    const float b = __half2float(bias[c]);
    float sum = 0.f;
#pragma unroll
    for (int s = 0; s < 64; ++s) {
      const float y = values[s] + b;
      sum += y;
      scratch[(board * 64 + s) * channels + c] = __float2half(y);
    }
    pooled[c] = sum / 64.f;
  }
  se_gates(pooled, hidden, gates, channels, w1, b1, se, w2, b2, act);
  for (int c = threadIdx.x; c < channels; c += blockDim.x) {
    const float scale = 1.f / (1.f + expf(-gates[c])), shift = gates[channels + c];
    float values[64];
#pragma unroll
    for (int s = 0; s < 64; ++s) {
      const long at = (board * 64 + s) * channels + c;
      const float y = activate(scale * __half2float(scratch[at]) + shift + __half2float(x[at]), act);
      x[at] = __float2half(y);
      values[s] = y;
    }
    if (v) winograd_points_from_board<M>(values, v, tiles, channels, board, c);
  }
}

// The entry points, per output tile (F(2×2, 3×3) and F(4×4, 3×3)).
#define WINOGRAD_ENTRIES(M)                                                                                         \
  KERNEL void winograd_input_f##M(const __half* x, int channels, __half* v, int batch) {                            \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_input<M>(x, channels, v, batch);                                                                       \
  }                                                                                                                 \
  KERNEL void winograd_output_f##M(const __half* m, int channels, const __half* bias, const __half* residual,       \
                                   int act, __half* out, __half* v, int batch) {                                    \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_output<M>(m, channels, bias, residual, act, out, v, batch);                                            \
  }                                                                                                                 \
  KERNEL void winograd_se_output_f##M(const __half* m, int channels, const __half* bias, __half* scratch,           \
                                      __half* x, const __half* w1, const __half* b1, int se, const __half* w2,      \
                                      const __half* b2, int act, __half* v, int batch) {                            \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_se_output<M>(m, channels, bias, scratch, x, w1, b1, se, w2, b2, act, v, batch);                        \
  }
WINOGRAD_ENTRIES(2)
WINOGRAD_ENTRIES(4)
