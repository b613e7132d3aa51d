// Does compute-sanitizer's initcheck see the writes of cuBLAS / cuBLASLt GEMMs?
//
// Allocates the output of one fp16 GEMM (fp32 accumulation, the shapes and layouts lc0rs uses
// for its dense layers) without initialising it, lets the library write it, and reads it
// back with a trivial kernel. Run under `compute-sanitizer --tool initcheck`: every report is
// a read of memory the tool believes no one wrote. The writer and the allocator are chosen on
// the command line, so one run per combination separates "the library's writes are not seen"
// from "the memory is really not written":
//
//   initcheck_probe WRITER ALLOC M N K
//     WRITER: kernel (control: our own kernel writes C), blas (cublasGemmEx), lt (cublasLtMatmul)
//     ALLOC:  sync (cuMemAlloc), async (cuMemAllocAsync from the stream's pool, as cudarc does)
//
// Build: nvcc -O2 -arch=native initcheck_probe.cu -lcublasLt -lcublas -lcuda -o initcheck_probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK_CU(x) do { CUresult r = (x); if (r != CUDA_SUCCESS) { std::printf("%s failed: %d\n", #x, (int)r); std::exit(1); } } while (0)
#define CHECK_RT(x) do { cudaError_t r = (x); if (r != cudaSuccess) { std::printf("%s failed: %s\n", #x, cudaGetErrorString(r)); std::exit(1); } } while (0)
#define CHECK_BLAS(x) do { cublasStatus_t r = (x); if (r != CUBLAS_STATUS_SUCCESS) { std::printf("%s failed: %d\n", #x, (int)r); std::exit(1); } } while (0)

__global__ void write_all(__half* c, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) c[i] = __float2half(1.f);
}

__global__ void sum_all(const __half* c, size_t n, float* out) {
  float s = 0.f;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += __half2float(c[i]);
  atomicAdd(out, s);
}

static CUdeviceptr alloc(bool async_pool, size_t bytes, CUstream stream) {
  CUdeviceptr p = 0;
  if (async_pool) {
    CHECK_CU(cuMemAllocAsync(&p, bytes, stream));
    CHECK_CU(cuStreamSynchronize(stream));
  } else {
    CHECK_CU(cuMemAlloc(&p, bytes));
  }
  return p;
}

int main(int argc, char** argv) {
  if (argc != 6) { std::printf("usage: %s kernel|blas|lt sync|async M N K\n", argv[0]); return 2; }
  const char* writer = argv[1];
  const bool async_pool = std::strcmp(argv[2], "async") == 0;
  const int m = std::atoi(argv[3]), n = std::atoi(argv[4]), k = std::atoi(argv[5]);
  CHECK_RT(cudaFree(nullptr));  // creates the primary context
  cudaStream_t stream;
  CHECK_RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Row-major X[m][k] and W[n][k], Y[m][n] = X·Wᵀ: column-major C = Wᵀᵀ... i.e. cuBLAS computes
  // Yᵀ[n][m] = W[n][k] · Xᵀ[k][m] with op(W) = T on a k×n column-major W, as lc0rs maps it.
  std::vector<__half> hx((size_t)m * k), hw((size_t)n * k);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = __float2half(((i * 37) % 17) / 17.f - 0.5f);
  for (size_t i = 0; i < hw.size(); ++i) hw[i] = __float2half(((i * 29) % 13) / 13.f - 0.5f);
  CUdeviceptr x = alloc(async_pool, hx.size() * 2, stream), w = alloc(async_pool, hw.size() * 2, stream);
  CUdeviceptr y = alloc(async_pool, (size_t)m * n * 2, stream), out = alloc(async_pool, 4, stream);
  CHECK_CU(cuMemcpyHtoD(x, hx.data(), hx.size() * 2));
  CHECK_CU(cuMemcpyHtoD(w, hw.data(), hw.size() * 2));
  CHECK_CU(cuMemsetD8(out, 0, 4));
  const float alpha = 1.f, beta = 0.f;
  if (std::strcmp(writer, "kernel") == 0) {
    write_all<<<256, 256, 0, stream>>>((__half*)y, (size_t)m * n);
  } else if (std::strcmp(writer, "blas") == 0) {
    cublasHandle_t h;
    CHECK_BLAS(cublasCreate(&h));
    CHECK_BLAS(cublasSetStream(h, stream));
    CHECK_BLAS(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, (void*)w, CUDA_R_16F, k,
                            (void*)x, CUDA_R_16F, k, &beta, (void*)y, CUDA_R_16F, n,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    cublasLtHandle_t h;
    CHECK_BLAS(cublasLtCreate(&h));
    cublasLtMatmulDesc_t op;
    CHECK_BLAS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T;
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    cublasLtMatrixLayout_t la, lb, lc;
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, k, n, k));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, m, k));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, n, m, n));
    const size_t ws_bytes = 32u << 20;
    CUdeviceptr ws = alloc(async_pool, ws_bytes, stream);
    cublasLtMatmulPreference_t pref;
    CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &result, &found));
    if (found == 0) { std::printf("no cuBLASLt algorithm\n"); return 1; }
    CHECK_BLAS(cublasLtMatmul(h, op, &alpha, (void*)w, la, (void*)x, lb, &beta, (void*)y, lc, (void*)y, lc,
                              &result.algo, (void*)ws, ws_bytes, stream));
  }
  sum_all<<<64, 256, 0, stream>>>((const __half*)y, (size_t)m * n, (float*)out);
  float sum = 0.f;
  CHECK_RT(cudaStreamSynchronize(stream));
  CHECK_CU(cuMemcpyDtoH(&sum, out, 4));
  std::printf("writer=%s alloc=%s m=%d n=%d k=%d sum=%g\n", writer, async_pool ? "async" : "sync", m, n, k, sum);
  return 0;
}
