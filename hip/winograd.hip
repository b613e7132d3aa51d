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
// Each thread owns one tile of one channel of one board, neighbouring threads neighbouring
// channels (coalesced accesses). An output transform writes its tile's squares, and the
// next convolution's input transform of the same tile reads the squares around it, written by
// the threads of the neighbouring tiles: the kernels that do both hold every tile of a board's
// channels in one block and synchronise between the two.

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

// Channels per block of `winograd_output` and `winograd_se_apply`: a row of 32 threads side by
// side, each with a pair of neighbouring channels (64 channels, 128 coalesced bytes a row), and
// one row per tile of a board.
#define WINOGRAD_CHANNELS 32

// A thread's pair of neighbouring channels c, c + 1 (the second absent past the last channel).
// With an even channel count every pair is 4-byte aligned and moves as one __half2; with an odd
// one (only tests have them) the halves move one by one.
struct ChannelPair {
  int c;
  bool two, packed;
};

static __device__ __forceinline__ ChannelPair channel_pair(int c, int channels) {
  return ChannelPair{c, c + 1 < channels, (channels & 1) == 0};
}

static __device__ __forceinline__ float2 load_pair(const __half* p, const ChannelPair& q) {
  if (q.packed) return __half22float2(*(const __half2*)p);
  return make_float2(__half2float(p[0]), q.two ? __half2float(p[1]) : 0.f);
}

// Stores the pair rounded to fp16 and returns the rounded values. (Not through __low2half and
// __high2half: HIP-CPU swaps the two.)
static __device__ __forceinline__ float2 store_pair(__half* p, const ChannelPair& q, float2 v) {
  if (q.packed) {
    const __half2 h = __floats2half2_rn(v.x, v.y);
    *(__half2*)p = h;
    return __half22float2(h);
  }
  const __half lo = __float2half(v.x), hi = __float2half(v.y);
  p[0] = lo;
  if (q.two) p[1] = hi;
  return make_float2(__half2float(lo), __half2float(hi));
}

// The points of tile `tile` of a channel pair of `board`, its squares given by `square(s)` (a
// float2 of the pair at square s, rank-major), into `v` ([points][tiles][C], `tiles`: of the
// whole batch).
template <int M, typename Square>
static __device__ __forceinline__ void winograd_tile_points(Square square, const ChannelPair& q, int channels,
                                                            long board, int tile, __half* __restrict__ v, long tiles) {
  constexpr int N = M + 2, SIDE = 8 / M;
  const int rank0 = M * (tile / SIDE) - 1, file0 = M * (tile % SIDE) - 1;
  float columns[2][N][N];  // columns[l][b] = Bᵀ · (column b of channel l's neighbourhood)
#pragma unroll
  for (int b = 0; b < N; ++b) {
    float d[2][N];
#pragma unroll
    for (int a = 0; a < N; ++a) {
      const int r = rank0 + a, f = file0 + b;
      const float2 s = (r >= 0 && r < 8 && f >= 0 && f < 8) ? square(r * 8 + f) : make_float2(0.f, 0.f);
      d[0][a] = s.x;
      d[1][a] = s.y;
    }
    Winograd<M>::bt(d[0], columns[0][b]);
    Winograd<M>::bt(d[1], columns[1][b]);
  }
  __half* out = v + (board * SIDE * SIDE + tile) * channels + q.c;
#pragma unroll
  for (int a = 0; a < N; ++a) {
    float row[2][N], t[2][N];
#pragma unroll
    for (int b = 0; b < N; ++b) {
      row[0][b] = columns[0][b][a];
      row[1][b] = columns[1][b][a];
    }
    Winograd<M>::bt(row[0], t[0]);
    Winograd<M>::bt(row[1], t[1]);
#pragma unroll
    for (int b = 0; b < N; ++b) store_pair(out + (long)(a * N + b) * tiles * channels, q, make_float2(t[0][b], t[1][b]));
  }
}

// Tile `tile` of a channel pair of `board` from its points in `m` (Aᵀ·M·A): values[l][i·M + j]
// is channel l's square (rank0 + i, file0 + j).
template <int M>
static __device__ __forceinline__ void winograd_tile_squares(const __half* __restrict__ m, long tiles, int channels,
                                                             long board, int tile, const ChannelPair& q,
                                                             float values[2][M * M]) {
  constexpr int N = M + 2, SIDE = 8 / M;
  const __half* in = m + (board * SIDE * SIDE + tile) * channels + q.c;
  float columns[2][N][M];  // columns[l][b] = Aᵀ · (column b of channel l's points)
#pragma unroll
  for (int b = 0; b < N; ++b) {
    float p[2][N];
#pragma unroll
    for (int a = 0; a < N; ++a) {
      const float2 pair = load_pair(in + (long)(a * N + b) * tiles * channels, q);
      p[0][a] = pair.x;
      p[1][a] = pair.y;
    }
    Winograd<M>::at(p[0], columns[0][b]);
    Winograd<M>::at(p[1], columns[1][b]);
  }
#pragma unroll
  for (int i = 0; i < M; ++i) {
    float row[2][N], o[2][M];
#pragma unroll
    for (int b = 0; b < N; ++b) {
      row[0][b] = columns[0][b][i];
      row[1][b] = columns[1][b][i];
    }
    Winograd<M>::at(row[0], o[0]);
    Winograd<M>::at(row[1], o[1]);
#pragma unroll
    for (int j = 0; j < M; ++j) {
      values[0][i * M + j] = o[0][j];
      values[1][i * M + j] = o[1][j];
    }
  }
}

// The row of square j of a tile's M × M: (rank0 + j / M) · 8 + file0 + j % M.
template <int M>
static __device__ __forceinline__ int winograd_square(int tile, int j) {
  constexpr int SIDE = 8 / M;
  return (M * (tile / SIDE) + j / M) * 8 + M * (tile % SIDE) + j % M;
}

// The input transform of a convolution's input x ([batch·64][C]) into v, a thread per tile and
// channel pair.
template <int M>
static __device__ void winograd_input(const __half* __restrict__ x, int channels, __half* __restrict__ v, int batch) {
  constexpr int TILES = 64 / (M * M);
  const int pairs = (channels + 1) / 2;
  const long tiles = (long)TILES * batch, total = tiles * pairs;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const ChannelPair q = channel_pair(2 * (int)(i % pairs), channels);
    const long tile = i / pairs, board = tile / TILES;
    const __half* squares = x + board * 64 * channels + q.c;
    winograd_tile_points<M>([&](int s) { return load_pair(squares + (long)s * channels, q); }, q, channels, board,
                            (int)(tile % TILES), v, tiles);
  }
}

// What one block of `winograd_output` and `winograd_se_apply` shares: the board's squares of its
// channels as written (rank-major, a __half2 per pair), from which the next input transform
// reads each tile's neighbourhood without going back to global memory, and each tile's sums of
// its squares for the squeeze-excitation's means.
template <int M>
struct WinogradBoard {
  __half2 squares[64][WINOGRAD_CHANNELS];
  float sums[64 / (M * M)][2 * WINOGRAD_CHANNELS];
};

// The block's thread: its tile (a row of WINOGRAD_CHANNELS threads) and channel pair.
struct WinogradThread {
  int tile, lane;
  ChannelPair q;
  bool mine;
};

template <int M>
static __device__ __forceinline__ WinogradThread winograd_thread(int channels) {
  const int tile = threadIdx.x / WINOGRAD_CHANNELS, lane = threadIdx.x % WINOGRAD_CHANNELS;
  const ChannelPair q = channel_pair(2 * (blockIdx.y * WINOGRAD_CHANNELS + lane), channels);
  return WinogradThread{tile, lane, q, q.c < channels && tile < 64 / (M * M)};
}

// Stores the thread's rounded values of square `s` in the block's board, and adds them to
// `sum`.
template <int M>
static __device__ __forceinline__ void stage_square(WinogradBoard<M>& staged, const WinogradThread& t, int s,
                                                    float2 rounded, float2& sum) {
  staged.squares[s][t.lane] = __floats2half2_rn(rounded.x, rounded.y);
  sum.x += rounded.x;
  sum.y += rounded.y;
}

// After the block's threads staged their squares: the next convolution's points into `v` where
// given, and where `means` is given each channel's mean over the board into
// means[board·2C + c] (the first half of the board's gates). Every thread of the block calls it.
template <int M>
static __device__ void winograd_finish_board(WinogradBoard<M>& staged, const WinogradThread& t, float2 sum,
                                             int channels, long board, __half* __restrict__ v, float* means,
                                             int batch) {
  constexpr int TILES = 64 / (M * M);
  if (!v && !means) return;
  if (t.tile < TILES) {
    staged.sums[t.tile][2 * t.lane] = sum.x;
    staged.sums[t.tile][2 * t.lane + 1] = sum.y;
  }
  __syncthreads();
  if (v && t.mine) {
    const auto square = [&](int s) { return __half22float2(staged.squares[s][t.lane]); };
    winograd_tile_points<M>(square, t.q, channels, board, t.tile, v, (long)TILES * batch);
  }
  if (means && t.tile == 0 && t.q.c < channels) {
    float2 total = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < TILES; ++i) {
      total.x += staged.sums[i][2 * t.lane];
      total.y += staged.sums[i][2 * t.lane + 1];
    }
    means[board * 2 * channels + t.q.c] = total.x / 64.f;
    if (t.q.two) means[board * 2 * channels + t.q.c + 1] = total.y / 64.f;
  }
}

// The output transform of a convolution's products m ([points][tiles][K]), then
// y = act(out + bias (+ residual)) written to `out` ([batch·64][K]); where `v` is given, y
// transformed into v (the next convolution's input points), and where `means` is given y's mean
// over each board's squares (`winograd_finish_board`). `residual` may be `out` itself (a
// block's skip, updated in place: each thread reads its squares before it writes them). Block
// (board, group) holds every tile of channels 64·group … + 63.
template <int M>
static __device__ void winograd_output(const __half* __restrict__ m, int channels, const __half* __restrict__ bias,
                                       const __half* residual, int act, __half* out, __half* __restrict__ v,
                                       float* __restrict__ means, int batch) {
  constexpr int TILES = 64 / (M * M);
  __shared__ WinogradBoard<M> staged;
  const long board = blockIdx.x;
  const WinogradThread t = winograd_thread<M>(channels);
  float2 sum = make_float2(0.f, 0.f);
  if (t.mine) {
    float values[2][M * M];
    winograd_tile_squares<M>(m, (long)TILES * batch, channels, board, t.tile, t.q, values);
    const float2 b = load_pair(bias + t.q.c, t.q);
#pragma unroll
    for (int j = 0; j < M * M; ++j) {
      const int s = winograd_square<M>(t.tile, j);
      __half* at = out + (board * 64 + s) * channels + t.q.c;
      float2 y = make_float2(values[0][j] + b.x, values[1][j] + b.y);
      if (residual) {
        const float2 r = load_pair(residual + (at - out), t.q);
        y.x += r.x;
        y.y += r.y;
      }
      const float2 rounded = store_pair(at, t.q, make_float2(activate(y.x, act), activate(y.y, act)));
      stage_square<M>(staged, t, s, rounded, sum);
    }
  }
  winograd_finish_board<M>(staged, t, sum, channels, board, v, means, batch);
}

// Squeeze-excitation after a block's second convolution, `winograd_output`'s block layout:
// x = act(sigmoid(γ)·y + β + x) with the gates [γ; β] of `se_gates_of_means` (`gates`,
// [batch][2C]), then x transformed into `v` (the next block's first convolution) where given.
template <int M>
static __device__ void winograd_se_apply(const __half* __restrict__ y, const float* __restrict__ gates, int channels,
                                         __half* x, int act, __half* __restrict__ v, int batch) {
  __shared__ WinogradBoard<M> staged;
  const long board = blockIdx.x;
  const WinogradThread t = winograd_thread<M>(channels);
  float2 sum = make_float2(0.f, 0.f);
  if (t.mine) {
    const float* g = gates + board * 2 * channels + t.q.c;
    const int second = t.q.two ? 1 : 0;
    const float2 scale = make_float2(1.f / (1.f + expf(-g[0])), 1.f / (1.f + expf(-g[second])));
    const float2 shift = make_float2(g[channels], g[channels + second]);
#pragma unroll
    for (int j = 0; j < M * M; ++j) {
      const int s = winograd_square<M>(t.tile, j);
      const long at = (board * 64 + s) * channels + t.q.c;
      const float2 yv = load_pair(y + at, t.q), xv = load_pair(x + at, t.q);
      const float2 z = make_float2(activate(scale.x * yv.x + shift.x + xv.x, act),
                                   activate(scale.y * yv.y + shift.y + xv.y, act));
      stage_square<M>(staged, t, s, store_pair(x + at, t.q, z), sum);
    }
  }
  winograd_finish_board<M>(staged, t, sum, channels, board, v, nullptr, batch);
}

// Squeeze-excitation's gates, one block per position, from the means of the block's second
// convolution output (with its bias) over the squares, which `winograd_output` left in the
// first C of the position's 2C gates: `se_gates` then overwrites them with gates[position][2C].
// Dynamic shared memory: (C + se + 2C) floats.
KERNEL void se_gates_of_means(float* gates, int channels, const __half* __restrict__ w1,
                              const __half* __restrict__ b1, int se, const __half* __restrict__ w2,
                              const __half* __restrict__ b2, int act) {
  PRIOR_KERNELS_DONE();
  DYNAMIC_SHARED(float, shared);
  float* pooled = shared;
  float* hidden = pooled + channels;
  float* block_gates = hidden + se;
  float* mine = gates + (long)blockIdx.x * 2 * channels;
  for (int c = threadIdx.x; c < channels; c += blockDim.x) pooled[c] = mine[c];
  se_gates(pooled, hidden, block_gates, channels, w1, b1, se, w2, b2, act);
  for (int k = threadIdx.x; k < 2 * channels; k += blockDim.x) mine[k] = block_gates[k];
}

// The entry points, per output tile (F(2×2, 3×3) and F(4×4, 3×3)).
#define WINOGRAD_ENTRIES(M)                                                                                         \
  KERNEL void winograd_input_f##M(const __half* x, int channels, __half* v, int batch) {                            \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_input<M>(x, channels, v, batch);                                                                       \
  }                                                                                                                 \
  KERNEL void winograd_output_f##M(const __half* m, int channels, const __half* bias, const __half* residual,       \
                                   int act, __half* out, __half* v, float* means, int batch) {                      \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_output<M>(m, channels, bias, residual, act, out, v, means, batch);                                     \
  }                                                                                                                 \
  KERNEL void winograd_se_apply_f##M(const __half* y, const float* gates, int channels, __half* x, int act,       \
                                     __half* v, int batch) {                                                        \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_se_apply<M>(y, gates, channels, x, act, v, batch);                                                     \
  }
WINOGRAD_ENTRIES(2)
WINOGRAD_ENTRIES(4)
