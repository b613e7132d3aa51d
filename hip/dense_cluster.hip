// lc0rs dense layer for a few rows split over the k dimension of a thread-block cluster (NVIDIA
// sm_90 and newer).

#if defined(GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
// dense_cluster: y = act(x·Wᵀ + bias) with W [n][k] and x [m][k] row-major, bias may be null.
// At batch 1 (64 rows) dense_mma gives each block all k of its outputs, so every block of a wide
// layer reads all 64 rows of x after its wait (T82's QKV: 98 KB a block, the longest step of
// the layer). Here a cluster of DENSE_CLUSTER blocks shares 64 rows × DENSE_CLUSTER_COLS
// outputs, each block one k/DENSE_CLUSTER slice: its slice of W goes to shared memory
// (cp.async) before the wait, its slice of x (64 rows, 12 KB at k = 768) after it; 8 warps
// (4 row tiles × 2 column halves) multiply with ldmatrix and mma.sync m16n8k16 (fp32
// accumulation); the partial tiles stay in each block's shared memory, and after a cluster
// barrier block r sums column group r of all DENSE_CLUSTER partials through distributed
// shared memory, adds the bias, applies the activation and stores. Rows from m on read as zero
// and are not stored. n a multiple of DENSE_CLUSTER_COLS; k (a template argument) a multiple
// of 16·DENSE_CLUSTER.
#define DENSE_CLUSTER 8
#define DENSE_CLUSTER_ROWS 64
#define DENSE_CLUSTER_COLS 64
#define DENSE_CLUSTER_THREADS 256
// Row stride (halves) of the W and x slices in shared memory: 16 bytes more than a slice row,
// so that the 8 rows an ldmatrix reads start in distinct 16-byte bank groups.
#define DENSE_CLUSTER_LD(k) ((k) / DENSE_CLUSTER + 8)

// This block's rank in its cluster.
static __device__ __forceinline__ u32 cluster_rank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every block of the cluster arrives; shared-memory writes before it are
// visible to the cluster after it.
static __device__ __forceinline__ void cluster_barrier() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Two floats at `p`'s offset in the shared memory of the cluster's block `rank`.
static __device__ __forceinline__ float2 load_cluster_float2(const float* p, u32 rank) {
  const u32 local = (u32)__cvta_generic_to_shared(p);
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  float2 v;
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
  return v;
}

template <int K>
static __device__ void dense_cluster_body(const __half* __restrict__ x, const __half* __restrict__ w,
                                          const __half* __restrict__ bias, int act, __half* __restrict__ y, int m,
                                          int n) {
  constexpr int KB = K / DENSE_CLUSTER, LD = DENSE_CLUSTER_LD(K), CHUNKS = KB / 8;
  constexpr int COLS = DENSE_CLUSTER_COLS, ROWS = DENSE_CLUSTER_ROWS, WARP_COLS = COLS / 2;
  constexpr int TILES = WARP_COLS / 8, LDP = COLS + 4;
  static_assert(KB % 16 == 0, "k: a multiple of 16 per block of the cluster");
  DYNAMIC_SHARED(float, shared_floats);
  __half* ws = (__half*)shared_floats;  // [COLS][LD]: this block's k slice of the cluster's W rows
  __half* xs = ws + COLS * LD;          // [ROWS][LD]: the same k slice of the rows
  float* partial = shared_floats;       // [ROWS][LDP], once the products are done
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, g = lane / 4, tq = lane % 4;
  const u32 rank = cluster_rank();
  const int col0 = (blockIdx.x / DENSE_CLUSTER) * COLS, k0 = rank * KB;
  const long row0 = (long)blockIdx.y * ROWS;

  // Weights are no kernel's output: they load before the wait.
  for (int c = t; c < COLS * CHUNKS; c += DENSE_CLUSTER_THREADS) {
    const int r = c / CHUNKS, q = (c % CHUNKS) * 8;
    copy16_async(ws + r * LD + q, w + (long)(col0 + r) * K + k0 + q);
  }
  asm volatile("cp.async.commit_group;\n" ::);
  PRIOR_KERNELS_DONE();
  for (int c = t; c < ROWS * CHUNKS; c += DENSE_CLUSTER_THREADS) {
    const int r = c / CHUNKS, q = (c % CHUNKS) * 8;
    if (row0 + r < m) {
      copy16_async(xs + r * LD + q, x + (row0 + r) * K + k0 + q);
    } else {
      const u32 zero[4] = {0u, 0u, 0u, 0u};
      copy16(xs + r * LD + q, zero);
    }
  }
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();

  // Warp (row tile warp % 4, column half warp / 4): 16 rows × WARP_COLS outputs.
  const int wr = (warp % 4) * 16, wc = (warp / 4) * WARP_COLS;
  float acc[TILES][4];
  #pragma unroll
  for (int j = 0; j < TILES; ++j)
    #pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  #pragma unroll
  for (int ks = 0; ks < KB; ks += 16) {
    u32 a[4];
    ldmatrix_x4(a, xs + (wr + lane % 16) * LD + ks + (lane / 16) * 8);
    #pragma unroll
    for (int j = 0; j < TILES; j += 2) {
      // Matrices: tile j at k ks and ks + 8, then tile j + 1 likewise (B fragments b0, b1).
      u32 b[4];
      ldmatrix_x4(b, ws + (wc + 8 * j + (lane / 16) * 8 + lane % 8) * LD + ks + ((lane / 8) % 2) * 8);
      mma_16816(acc[j], a, b);
      mma_16816(acc[j + 1], a, b + 2);
    }
  }
  __syncthreads();  // every warp is done with the slices before the partials overwrite them
  #pragma unroll
  for (int j = 0; j < TILES; ++j) {
    float* p = partial + (wr + g) * LDP + wc + 8 * j + 2 * tq;
    p[0] = acc[j][0];
    p[1] = acc[j][1];
    p[8 * LDP] = acc[j][2];
    p[8 * LDP + 1] = acc[j][3];
  }
  cluster_barrier();

  // Block `rank` sums, bias and stores its COLS / DENSE_CLUSTER columns of all rows: two
  // columns of one row per thread.
  constexpr int OWN = COLS / DENSE_CLUSTER;
  static_assert(ROWS * OWN == 2 * DENSE_CLUSTER_THREADS, "two outputs a thread");
  const int r = t / (OWN / 2), c = rank * OWN + 2 * (t % (OWN / 2));
  float2 sum = make_float2(0.f, 0.f);
  #pragma unroll
  for (u32 q = 0; q < DENSE_CLUSTER; ++q) {
    const float2 v = load_cluster_float2(partial + r * LDP + c, q);
    sum.x += v.x;
    sum.y += v.y;
  }
  if (bias) {
    const float2 b = __half22float2(*(const __half2*)(bias + col0 + c));
    sum.x += b.x;
    sum.y += b.y;
  }
  if (row0 + r < m)
    *(__half2*)(y + (row0 + r) * n + col0 + c) = __floats2half2_rn(activate(sum.x, act), activate(sum.y, act));
  cluster_barrier();  // no block leaves while another still reads its partials
}

KERNEL void __launch_bounds__(DENSE_CLUSTER_THREADS) __cluster_dims__(DENSE_CLUSTER, 1, 1) dense_cluster_k768(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_cluster_body<768>(x, w, bias, act, y, m, n); }
KERNEL void __launch_bounds__(DENSE_CLUSTER_THREADS) __cluster_dims__(DENSE_CLUSTER, 1, 1) dense_cluster_k1024(const __half* x, const __half* w, const __half* bias, int act, __half* y, int m, int n) { dense_cluster_body<1024>(x, w, bias, act, y, m, n); }
#endif
