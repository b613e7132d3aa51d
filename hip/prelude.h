// lc0rs portability prelude: the same kernel source compiles under NVRTC (CUDA), hipRTC and
// hipcc (AMD, wave32 RDNA and wave64 CDNA). Facts: docs/gpu-apis.md §2.3–2.5.
#if defined(LC0RS_HIP_CPU)
  // The emulator (backend hip-emu): HIP-CPU on the host, compiled by g++ with WARP_SIZE given
  // (HIP-CPU defines no AMDGCN/GFX macro). What HIP-CPU lacks or does differently lives here.
  #define GPU_HIP 1
  #define GPU_EMU 1
  #include <cmath>
  #include <cstring>
  #include <hip/hip_runtime.h>
  #include <hip/hip_fp16.h>
  #ifndef WARP_SIZE
    #error "the emulator needs WARP_SIZE (64 or 32)"
  #endif
  // HIP-CPU marks kernels `flatten, simd`: 70-235 s of g++ per build instead of 10-15 s, with
  // the same results.
  #undef __global__
  #define __global__
  #undef __device__
  #define __device__
  // `alignas` does not fit: `__shared__` is `thread_local` there.
  #define __align__(n) __attribute__((aligned(n)))
  static inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
  // Every thread of a block must reach each `__syncthreads()` (a lane that returned before a
  // barrier is undefined behaviour on AMD GPUs, and HIP-CPU's barrier would just skip it): each
  // barrier counts its arrivals and records the first one some thread of the block missed, which
  // the launch then reports. A block runs on one OS thread (its threads are fibers), so the
  // counts are per OS thread, reset when another block (of this or a later launch, which the
  // entry points number) starts there.
  #include <atomic>
  #include <vector>
  inline std::atomic<int> lc0rs_missed_barrier_line{0};
  inline std::atomic<unsigned long> lc0rs_launch_number{0};
  static inline void lc0rs_counted_syncthreads(int line) {
    struct Counts { unsigned long launch = 0; long block = -1; std::vector<unsigned> reached, arrivals; };
    thread_local Counts counts;
    const unsigned long launch = lc0rs_launch_number.load();
    const long block = blockIdx.x + (long)gridDim.x * (blockIdx.y + (long)gridDim.y * blockIdx.z);
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    if (counts.launch != launch || counts.block != block) {
      counts = Counts{launch, block, std::vector<unsigned>(threads, 0), {}};
    }
    const unsigned me = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned k = counts.reached[me]++;
    if (counts.arrivals.size() <= k) counts.arrivals.resize(k + 1, 0);
    ++counts.arrivals[k];
    __syncthreads();
    int none = 0;
    if (counts.arrivals[k] != threads) lc0rs_missed_barrier_line.compare_exchange_strong(none, line);
  }
  #define __syncthreads() lc0rs_counted_syncthreads(__LINE__)
  // HIP-CPU sizes dynamic shared memory by the launch; `extern __shared__` links to nothing.
  #define DYNAMIC_SHARED(type, name) HIP_DYNAMIC_SHARED(type, name)
  #if defined(LC0RS_BROKEN_SHUFFLE)
    // A control that must make the kernel tests fail: every shuffle returns the lane's own value.
    #define SHFL_XOR(v, m) (v)
  #else
    #define SHFL_XOR(v, m) __shfl_xor((v), (m), WARP_SIZE)
  #endif
#elif defined(__HIP__) || defined(__HIPCC_RTC__) || defined(__HIPCC__)
  #define GPU_HIP 1
  #if !defined(__HIPCC_RTC__)
    #include <hip/hip_runtime.h>
    #include <hip/hip_fp16.h>
  #endif
  #ifndef WARP_SIZE
    #if defined(__AMDGCN_WAVEFRONT_SIZE__)
      #define WARP_SIZE __AMDGCN_WAVEFRONT_SIZE__
    #elif defined(__AMDGCN_WAVEFRONT_SIZE)
      #define WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
    #elif defined(__GFX9__)
      #define WARP_SIZE 64
    #else
      #define WARP_SIZE 32
    #endif
  #endif
  #define SHFL_XOR(v, m) __shfl_xor((v), (m), WARP_SIZE)
  #define DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#else
  #define GPU_CUDA 1
  #include <cuda_fp16.h>
  #ifndef WARP_SIZE
    #define WARP_SIZE 32
  #endif
  #define SHFL_XOR(v, m) __shfl_xor_sync(0xffffffffu, (v), (m))
  #define DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif

// Programmatic dependent launch (NVIDIA sm_90 and newer, backend option `pdl`): a kernel launched
// with it may start while the previous kernel of its stream still runs. Every kernel therefore
// calls PRIOR_KERNELS_DONE() before it touches anything another kernel writes (first thing, or
// after loading its weights, which no kernel writes): it waits until the previous kernel has
// finished and its writes are visible, then lets the next kernel start launching, so that the
// launch overlaps this kernel's work. Without the launch attribute, and on every other target,
// it costs nothing.
#if defined(GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  #define PRIOR_KERNELS_DONE() \
    asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory")
#else
  #define PRIOR_KERNELS_DONE()
#endif

typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef short i16;

// 16 bytes between 16-byte aligned addresses. A copy, not a `uint4` access to `__half` data:
// that type pun is undefined behaviour (strict aliasing), and g++ -O2 miscompiles it; every
// compiler turns this into one 16-byte access. (NVRTC has `memcpy` in device code but no
// `__builtin_memcpy`; hipRTC has no C library headers.)
#if defined(GPU_CUDA)
  #define LC0RS_MEMCPY memcpy
#else
  #define LC0RS_MEMCPY __builtin_memcpy
#endif
static __device__ __forceinline__ void copy16(void* dst, const void* src) {
  LC0RS_MEMCPY(__builtin_assume_aligned(dst, 16), __builtin_assume_aligned(src, 16), 16);
}

// 2ˣ and 1/x as the hardware's own approximations (relative error near 2⁻²²), for softmax, where
// the arguments of 2ˣ are ≤ 0 and a result below 2⁻¹²⁶ may become 0 and the sum is ≥ 1: CUDA's
// exp2f and `/` add range checks and a slow path around the same instruction.
static __device__ __forceinline__ float exp2_approx(float x) {
#if defined(GPU_CUDA)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#elif defined(__has_builtin) && !defined(GPU_EMU)
  #if __has_builtin(__builtin_amdgcn_exp2f)
  return __builtin_amdgcn_exp2f(x);
  #else
  return exp2f(x);
  #endif
#else
  return exp2f(x);
#endif
}
static __device__ __forceinline__ float rcp_approx(float x) {
#if defined(GPU_CUDA)
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#elif defined(__has_builtin) && !defined(GPU_EMU)
  #if __has_builtin(__builtin_amdgcn_rcpf)
  return __builtin_amdgcn_rcpf(x);
  #else
  return 1.f / x;
  #endif
#else
  return 1.f / x;
#endif
}

// Unmangled names for cuModuleGetFunction / hipModuleGetFunction.
#define KERNEL extern "C" __global__

// Activation codes; the Rust side (src/gpu/kernels.rs) uses the same numbers.
#define ACT_IDENTITY 0
#define ACT_RELU 1
#define ACT_RELU2 2
#define ACT_MISH 3
#define ACT_SWISH 4
#define ACT_SELU 5
#define ACT_TANH 6
#define ACT_SIGMOID 7

static __device__ __forceinline__ float activate(float x, int act) {
  switch (act) {
    case ACT_RELU: return x > 0.f ? x : 0.f;
    case ACT_RELU2: { float r = x > 0.f ? x : 0.f; return r * r; }
    // tanh(softplus(x)) = n / (n + 2) with n = eˣ(eˣ + 2): one exponential instead of exp,
    // log1p and tanh. Beyond 20 the factor is 1 in fp32 (and n would overflow near 44).
    case ACT_MISH: { if (x > 20.f) return x; const float e = expf(x), n = e * (e + 2.f); return x * n / (n + 2.f); }
    case ACT_SWISH: return x / (1.f + expf(-x));
    case ACT_SELU: return x > 0.f ? 1.0507010f * x : 1.0507010f * 1.6732632f * (expf(x) - 1.f);
    case ACT_TANH: return tanhf(x);
    case ACT_SIGMOID: return 1.f / (1.f + expf(-x));
    default: return x;
  }
}

static __device__ __forceinline__ float warp_sum(float v) {
  #pragma unroll
  for (int m = WARP_SIZE / 2; m > 0; m /= 2) v += SHFL_XOR(v, m);
  return v;
}

// Sum over the block (at most WARP_SIZE warps); `scratch` holds one float per warp. Every
// warp adds the per-warp sums with shuffles, so every thread gets the same total.
static __device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  const int warps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? scratch[lane] : 0.f);
}

#if defined(GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
// NVIDIA tensor-core helpers (sm_80 and newer) of the CUDA-only fast paths. Fragment layouts:
// PTX ISA, "mma.m16n8k16" (g = lane/4 is the row, 2·(lane%4) the column pair).
static __device__ __forceinline__ void mma_16816(float* c, const u32* a, const u32* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static __device__ __forceinline__ u32 pack_half2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *(u32*)&h;
}
// Four 8×8 fp16 matrices from shared memory in one instruction: lanes 8i..8i+7 give the row
// addresses of matrix i; each lane receives, per matrix, the pair at (row lane/4, columns
// 2·(lane%4)): mma's fragment layout. `.trans` transposes each matrix.
static __device__ __forceinline__ void ldmatrix_x4(u32* r, const __half* p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
static __device__ __forceinline__ void ldmatrix_x4_trans(u32* r, const __half* p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// Copies 16 bytes global → shared without passing through registers; completes at
// cp.async.wait_group.
static __device__ __forceinline__ void copy16_async(__half* dst, const __half* src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
#endif

// AMD matrix cores: which 16×16×16 fp16 instruction (fp32 accumulation) the AMD kernels of
// hip/matrix.hip are built on, by target. Forms (their register layouts: hip/matrix.hip and
// docs/gpu-apis.md §2.6):
//   MATRIX_WMMA_GFX11 1: v_wmma_f32_16x16x16_f16, RDNA3/3.5 (gfx11xx), wave32;
//   MATRIX_WMMA_GFX12 2: the same instruction as RDNA4 (gfx12xx) lays it out, wave32;
//   MATRIX_MFMA_16     3: v_mfma_f32_16x16x16f16, CDNA2/3/4 (gfx90a, gfx94x, gfx950), wave64.
// LC0RS_MATRIX_FORM is the form the attention uses; HAS_MATRIX_FORM_n says which forms exist
// (the emulator has both WMMA forms at wave32, so that each can be tested; its attention takes
// gfx11's unless built with LC0RS_EMU_GFX12). Other targets,
// NVIDIA included, define none and compile no matrix kernel.
#define MATRIX_WMMA_GFX11 1
#define MATRIX_WMMA_GFX12 2
#define MATRIX_MFMA_16 3
#if defined(GPU_EMU)
  #if WARP_SIZE == 32 && defined(LC0RS_EMU_GFX12)
    #define LC0RS_MATRIX_FORM MATRIX_WMMA_GFX12
    #define HAS_MATRIX_FORM_1 1
    #define HAS_MATRIX_FORM_2 1
  #elif WARP_SIZE == 32
    #define LC0RS_MATRIX_FORM MATRIX_WMMA_GFX11
    #define HAS_MATRIX_FORM_1 1
    #define HAS_MATRIX_FORM_2 1
  #else
    #define LC0RS_MATRIX_FORM MATRIX_MFMA_16
    #define HAS_MATRIX_FORM_3 1
  #endif
#elif defined(GPU_HIP) && (defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || \
    defined(__gfx1103__) || defined(__gfx1150__) || defined(__gfx1151__) || defined(__gfx1152__) || \
    defined(__gfx1153__))
  #define LC0RS_MATRIX_FORM MATRIX_WMMA_GFX11
  #define HAS_MATRIX_FORM_1 1
#elif defined(GPU_HIP) && (defined(__gfx1200__) || defined(__gfx1201__))
  #define LC0RS_MATRIX_FORM MATRIX_WMMA_GFX12
  #define HAS_MATRIX_FORM_2 1
#elif defined(GPU_HIP) && (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || \
    defined(__gfx942__) || defined(__gfx950__))
  #define LC0RS_MATRIX_FORM MATRIX_MFMA_16
  #define HAS_MATRIX_FORM_3 1
#endif
#if defined(LC0RS_MATRIX_FORM)
  // The instructions' register types: clang's vectors on the GPU, GCC's in the emulator (which
  // defines the builtins themselves, src/gpu/emu/matrix.h).
  typedef _Float16 mx_half;
  #if defined(GPU_EMU)
    typedef _Float16 mx_half16 __attribute__((vector_size(32)));
    typedef _Float16 mx_half8 __attribute__((vector_size(16)));
    typedef _Float16 mx_half4 __attribute__((vector_size(8)));
    typedef float mx_float8 __attribute__((vector_size(32)));
    typedef float mx_float4 __attribute__((vector_size(16)));
  #else
    typedef _Float16 mx_half16 __attribute__((ext_vector_type(16)));
    typedef _Float16 mx_half8 __attribute__((ext_vector_type(8)));
    typedef _Float16 mx_half4 __attribute__((ext_vector_type(4)));
    typedef float mx_float8 __attribute__((ext_vector_type(8)));
    typedef float mx_float4 __attribute__((ext_vector_type(4)));
  #endif
#endif
