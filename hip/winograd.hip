// lc0rs' 3×3 convolutions as Winograd F(m×m, 3×3), m = 2 or 4: fp16 storage, fp32 arithmetic.
// A board is (8/m)² output tiles of m × m squares; tile t covers ranks m·(t / (8/m)) … + m − 1
// and files m·(t % (8/m)) … + m − 1, and reads the (m+2)² squares around them (zero off the
// board). With the transformed input V = Bᵀ·d·B and weights U = G·g·Gᵀ (uploaded as
// [points][K][C]), each point ξ is one GEMM M_ξ[tile][K] = V_ξ[tile][C] · U_ξ[K][C]ᵀ, and the
// output tile is Aᵀ·M·A. Transformed tensors are tile-major: element (ξ, tile T = board·tiles
// + t, c) at (T · points + ξ) · C + c, so that a tile's points are one contiguous run of
// points·C values (a transform's block reads and writes whole kilobytes of a board's tiles)
// and every point's GEMM a row-major matrix with rows points·C apart (lda = points·C, the
// points C apart in the batch). Activations are square-major as everywhere in the tower: row
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

// A value of the residual stream, kept in f32 from block to block (in fp16 the T78 shape's
// logits moved 8e-3 relative, against 1e-4 for rounding a block's inner outputs), or of a
// convolution's fp16 output.
static __device__ __forceinline__ float as_float(__half v) { return __half2float(v); }
static __device__ __forceinline__ float as_float(float v) { return v; }
static __device__ __forceinline__ void store_as(__half* p, float v) { *p = __float2half(v); }
static __device__ __forceinline__ void store_as(float* p, float v) { *p = v; }

// One channel of one board's squares, square-major: square s at squares[s · stride].
template <typename T>
struct BoardSquares {
  const T* squares;
  int stride;
  __device__ __forceinline__ float operator()(int s) const { return as_float(squares[s * stride]); }
};

// One input plane of one board as lc0 sends it: `value` on the squares whose bit of `mask` is
// set, 0 elsewhere.
struct PlaneSquares {
  u64 mask;
  float value;
  __device__ __forceinline__ float operator()(int s) const { return ((mask >> s) & 1ull) ? value : 0.f; }
};

// The points of tile `tile` of one channel of one board from its squares (`square(s)`, s =
// rank · 8 + file), into `out` (the tile's first point of the channel, `stride` values between
// points: one row of the points' C channels).
template <int M, typename Squares>
static __device__ __forceinline__ void winograd_tile_points(const Squares& square, int tile, __half* __restrict__ out,
                                                            int stride) {
  constexpr int N = M + 2, SIDE = 8 / M;
  const int rank0 = M * (tile / SIDE) - 1, file0 = M * (tile % SIDE) - 1;
  float columns[N][N];  // columns[b] = Bᵀ · (column b of the neighbourhood)
#pragma unroll
  for (int b = 0; b < N; ++b) {
    float d[N];
#pragma unroll
    for (int a = 0; a < N; ++a) {
      const int r = rank0 + a, f = file0 + b;
      d[a] = (r >= 0 && r < 8 && f >= 0 && f < 8) ? square(r * 8 + f) : 0.f;
    }
    Winograd<M>::bt(d, columns[b]);
  }
#pragma unroll
  for (int a = 0; a < N; ++a) {
    float row[N], t[N];
#pragma unroll
    for (int b = 0; b < N; ++b) row[b] = columns[b][a];
    Winograd<M>::bt(row, t);
#pragma unroll
    for (int b = 0; b < N; ++b) out[(a * N + b) * stride] = __float2half(t[b]);
  }
}

// The first point of channel c of tile `tile` of `board` in the tile-major `v` or `m`
// ([board·tiles + tile][points][C]).
template <int M>
static __device__ __forceinline__ long winograd_point0(int channels, long board, int tile, int c) {
  constexpr int TILES = 64 / (M * M), POINTS = (M + 2) * (M + 2);
  return ((board * TILES + tile) * POINTS) * channels + c;
}

// The points of tile `tile` of channel c of `board` from the square-major `x` ([batch·64][C],
// fp16 or the f32 stream), into `v`.
template <int M, typename T>
static __device__ __forceinline__ void winograd_board_points(const T* x, int channels, long board, int tile, int c,
                                                             __half* __restrict__ v) {
  winograd_tile_points<M>(BoardSquares<T>{x + board * 64 * channels + c, channels}, tile,
                          v + winograd_point0<M>(channels, board, tile, c), channels);
}

// Tile `tile` of channel c of `board` from its points in `m` (Aᵀ·M·A): values[i·M + j] is
// the square (rank0 + i, file0 + j).
template <int M>
static __device__ __forceinline__ void winograd_tile_squares(const __half* __restrict__ m, int channels, long board,
                                                             int tile, int c, float values[M * M]) {
  constexpr int N = M + 2;
  const __half* in = m + winograd_point0<M>(channels, board, tile, c);
  float columns[N][M];  // columns[b] = Aᵀ · (column b of the tile's points)
#pragma unroll
  for (int b = 0; b < N; ++b) {
    float p[N];
#pragma unroll
    for (int a = 0; a < N; ++a) p[a] = __half2float(in[(a * N + b) * channels]);
    Winograd<M>::at(p, columns[b]);
  }
#pragma unroll
  for (int i = 0; i < M; ++i) {
    float row[N], o[M];
#pragma unroll
    for (int b = 0; b < N; ++b) row[b] = columns[b][i];
    Winograd<M>::at(row, o);
#pragma unroll
    for (int j = 0; j < M; ++j) values[i * M + j] = o[j];
  }
}

// The row of square j of a tile's M × M: (rank0 + j / M) · 8 + file0 + j % M.
template <int M>
static __device__ __forceinline__ int winograd_square(int tile, int j) {
  constexpr int SIDE = 8 / M;
  return (M * (tile / SIDE) + j / M) * 8 + M * (tile % SIDE) + j % M;
}

// The row-major index of square j (`winograd_square`) of tile `tile` of `board`, channel c.
template <int M>
static __device__ __forceinline__ long winograd_at(int channels, long board, int tile, int j, int c) {
  return (board * 64 + winograd_square<M>(tile, j)) * channels + c;
}

// values[j] += x at square j of tile `tile` of channel c of `board`, every load issued before
// the caller's first store: `x` may be the very tensor the caller then writes (a skip updated in
// place), so a load after such a store could not be moved above it, and each square would wait
// for the one before it to come back from memory.
template <int M, typename T>
static __device__ __forceinline__ void winograd_tile_add(const T* x, int channels, long board, int tile, int c,
                                                         float values[M * M]) {
  const T* squares = x + board * 64 * channels + c;
#pragma unroll
  for (int j = 0; j < M * M; ++j) values[j] += as_float(squares[winograd_square<M>(tile, j) * channels]);
}

// The residual stream's new squares of tile `tile` of channel c of `board`: act(values[j]) into
// the f32 stream `x`, and into `x_half` (fp16, what the heads read) where given.
template <int M>
static __device__ __forceinline__ void winograd_stream_store(float* x, __half* x_half, int channels, long board,
                                                             int tile, int c, const float values[M * M], int act) {
#pragma unroll
  for (int j = 0; j < M * M; ++j) {
    const long at = winograd_at<M>(channels, board, tile, j, c);
    const float y = activate(values[j], act);
    x[at] = y;
    if (x_half) x_half[at] = __float2half(y);
  }
}

// The input transform of the input convolution straight from the planes as lc0 sends them
// (`masks` and `values`, `planes` a position, plane-major within it: the input upload's
// layout), into v: a thread per tile and plane, no square-major copy of the planes between.
template <int M>
static __device__ void winograd_planes(const u64* __restrict__ masks, const float* __restrict__ values, int planes,
                                       __half* __restrict__ v, int batch) {
  constexpr int TILES = 64 / (M * M);
  const long tiles = (long)TILES * batch, total = tiles * planes;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
    const int c = (int)(i % planes), tile = (int)(i / planes % TILES);
    const long board = i / planes / TILES;
    const PlaneSquares square{masks[board * planes + c], values[board * planes + c]};
    winograd_tile_points<M>(square, tile, v + winograd_point0<M>(planes, board, tile, c), planes);
  }
}

// Channels per block of `winograd_output` and `winograd_se_apply`, a warp's worth side by side
// (coalesced accesses), with every tile of each: 32 · tiles per board threads.
#define WINOGRAD_CHANNELS 32

// The board and first channel of a block of `winograd_output` or `winograd_se_apply`: block
// board·groups + group, the channel groups of one board neighbours, so that the blocks running
// at once read and write whole rows of each point and square (a board's channels) rather than
// one 64-byte piece of many boards' rows.
struct WinogradBlock {
  long board;
  int first_channel;
};

static __device__ __forceinline__ WinogradBlock winograd_block(int channels) {
  const int groups = (channels + WINOGRAD_CHANNELS - 1) / WINOGRAD_CHANNELS;
  return WinogradBlock{(long)(blockIdx.x / groups), (int)(blockIdx.x % groups) * WINOGRAD_CHANNELS};
}

// The output transform of a convolution's products m ([tiles][points][K]), then
// y = act(out + bias (+ residual)) written to `out` ([batch·64][K]) and, where `v` is given,
// transformed into v (the next convolution's input points) from `out`; where `means` is given,
// each channel's mean of y over the board into means[board·2K + c] (the first half of the
// board's squeeze-excitation gates, for `se_gates_of_means`). `out` is fp16 (a block's first
// convolution, or the second before squeeze-excitation) or the f32 residual stream, which is
// then also rounded into `x_half` where given (the last writer of the stream, for the heads).
// `residual` may be `out` itself (a block's skip, updated in place: each thread reads its
// squares before it writes them). Block board·groups + group (`winograd_block`) holds every
// tile of channels 32·group … + 31, channel-minor.
template <int M, typename O>
static __device__ void winograd_output(const __half* __restrict__ m, int channels, const __half* __restrict__ bias,
                                       const O* residual, int act, O* out, __half* __restrict__ x_half,
                                       __half* __restrict__ v, float* __restrict__ means) {
  constexpr int TILES = 64 / (M * M);
  __shared__ float tile_sums[TILES][WINOGRAD_CHANNELS];
  const WinogradBlock block = winograd_block(channels);
  const long board = block.board;
  const int lane = threadIdx.x % WINOGRAD_CHANNELS;
  const int tile = threadIdx.x / WINOGRAD_CHANNELS, c = block.first_channel + lane;
  const bool mine = c < channels && tile < TILES;
  float sum = 0.f;
  if (mine) {
    float values[M * M];
    winograd_tile_squares<M>(m, channels, board, tile, c, values);
    const float b = __half2float(bias[c]);
#pragma unroll
    for (int j = 0; j < M * M; ++j) values[j] += b;
    if (residual) winograd_tile_add<M>(residual, channels, board, tile, c, values);
#pragma unroll
    for (int j = 0; j < M * M; ++j) {
      const long at = winograd_at<M>(channels, board, tile, j, c);
      const float y = activate(values[j], act);
      store_as(out + at, y);
      if (x_half) x_half[at] = __float2half(y);
      sum += y;
    }
  }
  if (means) {
    if (tile < TILES) tile_sums[tile][lane] = sum;
    __syncthreads();
    if (tile == 0 && c < channels) {
      float total = 0.f;
#pragma unroll
      for (int t = 0; t < TILES; ++t) total += tile_sums[t][lane];
      means[board * 2 * channels + c] = total / 64.f;
    }
  }
  if (!v) return;
  __syncthreads();
  if (mine) winograd_board_points<M>(out, channels, board, tile, c, v);
}

// Squeeze-excitation after a block's second convolution, `winograd_output`'s block layout:
// x = act(sigmoid(γ)·y + β + x) on the f32 stream with the gates [γ; β] of `se_gates_of_means`
// (`gates`, [batch][2C]), rounded into `x_half` where given, then x transformed into `v` (the
// next block's first convolution) where given.
template <int M>
static __device__ void winograd_se_apply(const __half* __restrict__ y, const float* __restrict__ gates, int channels,
                                         float* x, int act, __half* __restrict__ x_half, __half* __restrict__ v) {
  constexpr int TILES = 64 / (M * M);
  const WinogradBlock block = winograd_block(channels);
  const long board = block.board;
  const int tile = threadIdx.x / WINOGRAD_CHANNELS, c = block.first_channel + threadIdx.x % WINOGRAD_CHANNELS;
  const bool mine = c < channels && tile < TILES;
  if (mine) {
    const float* g = gates + board * 2 * channels;
    const float scale = 1.f / (1.f + expf(-g[c])), shift = g[channels + c];
    float values[M * M];
#pragma unroll
    for (int j = 0; j < M * M; ++j) {
      values[j] = scale * __half2float(y[winograd_at<M>(channels, board, tile, j, c)]) + shift;
    }
    winograd_tile_add<M>(x, channels, board, tile, c, values);
    winograd_stream_store<M>(x, x_half, channels, board, tile, c, values, act);
  }
  if (!v) return;
  __syncthreads();
  if (mine) winograd_board_points<M>(x, channels, board, tile, c, v);
}

// Squeeze-excitation's gates of `per_block` (≤ SE_POSITIONS) positions a block, from the means
// of their second convolution's output (with its bias) over the squares, which
// `winograd_output` left in the first C of each position's 2C gates: `se_gates` then overwrites
// them with gates[position][2C]. Dynamic shared memory: per_block · (C + se) floats.
KERNEL void __launch_bounds__(SE_THREADS) se_gates_of_means(float* gates, int channels, const __half* __restrict__ w1,
                              const __half* __restrict__ b1, int se, const __half* __restrict__ w2,
                              const __half* __restrict__ b2, int act, int per_block, int batch) {
  PRIOR_KERNELS_DONE();
  DYNAMIC_SHARED(float, shared);
  const long first = (long)blockIdx.x * per_block;
  const int positions = batch - first < per_block ? (int)(batch - first) : per_block;
  float* pooled = shared;
  float* hidden = pooled + per_block * channels;
  float* mine = gates + first * 2 * channels;
  for (int i = threadIdx.x; i < positions * channels; i += blockDim.x) {
    pooled[i] = mine[(long)(i / channels) * 2 * channels + i % channels];
  }
  se_gates(pooled, hidden, positions, mine, 2 * channels, channels, w1, b1, se, w2, b2, act);
}

// The whole end of a block with squeeze-excitation for narrow towers, one block per board
// holding every tile of every channel (blockDim = tiles × `width`, `width` ≥ C a multiple of
// 32, thread (tile, c) = (threadIdx / width, threadIdx % width)): the output transform of the
// second convolution's products with its bias (kept in registers, in f32), each channel's mean
// over the board, the gates (`se_gates`), x = act(sigmoid(γ)·y + β + x), and where `v` is given
// the next convolution's points from the new x staged in shared memory; x is the f32 stream,
// rounded into `x_half` where given. One kernel instead of `winograd_output`,
// `se_gates_of_means` and `winograd_se_apply`, y never in global memory. Dynamic shared
// memory: (tiles·width + 3C + se + 64·C) floats.
template <int M>
static __device__ void winograd_se_board(const __half* __restrict__ m, int channels, const __half* __restrict__ bias,
                                         const __half* __restrict__ w1, const __half* __restrict__ b1, int se,
                                         const __half* __restrict__ w2, const __half* __restrict__ b2, int act,
                                         float* x, __half* __restrict__ x_half, __half* __restrict__ v) {
  constexpr int TILES = 64 / (M * M);
  DYNAMIC_SHARED(float, shared);
  const int width = blockDim.x / TILES;
  float* tile_sums = shared;                  // [TILES][width]
  float* pooled = tile_sums + TILES * width;  // [C]
  float* hidden = pooled + channels;          // [se]
  float* gates = hidden + se;                 // [2C]
  float* staged = gates + 2 * channels;  // [64][C], the board's new x
  const long board = blockIdx.x;
  const int tile = threadIdx.x / width, c = threadIdx.x % width;
  const bool mine = c < channels;
  float values[M * M];
  float sum = 0.f;
  if (mine) {
    winograd_tile_squares<M>(m, channels, board, tile, c, values);
    const float b = __half2float(bias[c]);
#pragma unroll
    for (int j = 0; j < M * M; ++j) {
      values[j] += b;
      sum += values[j];
    }
  }
  tile_sums[tile * width + c] = sum;
  __syncthreads();
  for (int k = threadIdx.x; k < channels; k += blockDim.x) {
    float total = 0.f;
    for (int t = 0; t < TILES; ++t) total += tile_sums[t * width + k];
    pooled[k] = total / 64.f;
  }
  se_gates(pooled, hidden, 1, gates, 2 * channels, channels, w1, b1, se, w2, b2, act);
  if (mine) {
    const float scale = 1.f / (1.f + expf(-gates[c])), shift = gates[channels + c];
#pragma unroll
    for (int j = 0; j < M * M; ++j) values[j] = scale * values[j] + shift;
    winograd_tile_add<M>(x, channels, board, tile, c, values);
#pragma unroll
    for (int j = 0; j < M * M; ++j) {
      const int s = winograd_square<M>(tile, j);
      const float z = activate(values[j], act);
      x[(board * 64 + s) * channels + c] = z;
      if (x_half) x_half[(board * 64 + s) * channels + c] = __float2half(z);
      staged[s * channels + c] = z;
    }
  }
  if (!v) return;
  __syncthreads();
  if (mine) {
    winograd_tile_points<M>(BoardSquares<float>{staged + c, channels}, tile, v + winograd_point0<M>(channels, board, tile, c),
                            channels);
  }
}

// The entry points, per output tile (F(2×2, 3×3) and F(4×4, 3×3)).
#define WINOGRAD_ENTRIES(M)                                                                                         \
  KERNEL void winograd_planes_f##M(const u64* masks, const float* values, int planes, __half* v, int batch) {      \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_planes<M>(masks, values, planes, v, batch);                                                            \
  }                                                                                                                 \
  KERNEL void winograd_output_f##M(const __half* m, int channels, const __half* bias, int act, __half* out,        \
                                   __half* v, float* means) {                                                       \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_output<M, __half>(m, channels, bias, nullptr, act, out, nullptr, v, means);                            \
  }                                                                                                                 \
  KERNEL void winograd_stream_output_f##M(const __half* m, int channels, const __half* bias, const float* residual,\
                                          int act, float* x, __half* x_half, __half* v) {                           \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_output<M, float>(m, channels, bias, residual, act, x, x_half, v, nullptr);                             \
  }                                                                                                                 \
  KERNEL void winograd_se_apply_f##M(const __half* y, const float* gates, int channels, float* x, int act,        \
                                     __half* x_half, __half* v) {                                                   \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_se_apply<M>(y, gates, channels, x, act, x_half, v);                                                    \
  }                                                                                                                 \
  KERNEL void __launch_bounds__(SE_THREADS) winograd_se_board_f##M(const __half* m, int channels,                   \
                                                                   const __half* bias, const __half* w1,          \
                                     const __half* b1, int se, const __half* w2, const __half* b2, int act,        \
                                     float* x, __half* x_half, __half* v) {                                         \
    PRIOR_KERNELS_DONE();                                                                                           \
    winograd_se_board<M>(m, channels, bias, w1, b1, se, w2, b2, act, x, x_half, v);                                 \
  }
WINOGRAD_ENTRIES(2)
WINOGRAD_ENTRIES(4)
