// Are racecheck's hazards inside cuBLASLt's Hopper GEMM kernels (`nvjet_sm90_*`) the library's
// own, independent of lc0rs?
//
// Runs one fp16 GEMM with the bias epilogue (fp32 accumulation; lc0rs' layout for a dense
// layer: row-major X[m][k], W[n][k], Y[m][n] = X·Wᵀ + b, i.e. cuBLASLt's column-major
// Yᵀ = op(W)·Xᵀ with TRANSA = T) once with *every* algorithm cuBLASLt's heuristic offers for it,
// each with fully initialised inputs, its own freshly written output and a workspace zeroed
// before the call, and checks each result against a host f64 reference. Nothing but
// cuBLASLt touches the memory between the zeroing and the check, so a racecheck report here is
// about NVIDIA's kernel alone. Run under `compute-sanitizer --tool racecheck`: the reports name
// the kernels; the program's own lines say which algorithms computed the right numbers.
//
//   racecheck_probe M N K
//
// Build: nvcc -O2 -arch=native racecheck_probe.cu -lcublasLt -o racecheck_probe
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_RT(x) do { cudaError_t r = (x); if (r != cudaSuccess) { std::printf("%s failed: %s\n", #x, cudaGetErrorString(r)); std::exit(1); } } while (0)
#define CHECK_LT(x) do { cublasStatus_t r = (x); if (r != CUBLAS_STATUS_SUCCESS) { std::printf("%s failed: %d\n", #x, (int)r); std::exit(1); } } while (0)

static const int kMaxAlgorithms = 16;
static const size_t kWorkspaceBytes = 32u << 20;

// Deterministic inputs in [-0.5, 0.5), exactly representable in fp16.
static std::vector<__half> pattern(size_t count, size_t stride, size_t modulus) {
  std::vector<__half> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = __float2half(((i * stride) % modulus) / float(modulus) - 0.5f);
  return v;
}

int main(int argc, char** argv) {
  if (argc != 4) { std::printf("usage: %s M N K\n", argv[0]); return 2; }
  const int m = std::atoi(argv[1]), n = std::atoi(argv[2]), k = std::atoi(argv[3]);
  if (m <= 0 || n <= 0 || k <= 0) { std::printf("M, N, K must be positive\n"); return 2; }
  const std::vector<__half> hx = pattern((size_t)m * k, 37, 17), hw = pattern((size_t)n * k, 29, 13),
                            hb = pattern((size_t)n, 7, 11);
  std::vector<double> want((size_t)m * n);
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) {
      double s = __half2float(hb[c]);
      for (int i = 0; i < k; ++i) s += (double)__half2float(hx[(size_t)r * k + i]) * __half2float(hw[(size_t)c * k + i]);
      want[(size_t)r * n + c] = s;
    }

  cudaStream_t stream;
  CHECK_RT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  __half *x, *w, *b, *y;
  void* ws;
  CHECK_RT(cudaMalloc(&x, hx.size() * 2));
  CHECK_RT(cudaMalloc(&w, hw.size() * 2));
  CHECK_RT(cudaMalloc(&b, hb.size() * 2));
  CHECK_RT(cudaMalloc(&y, (size_t)m * n * 2));
  CHECK_RT(cudaMalloc(&ws, kWorkspaceBytes));
  CHECK_RT(cudaMemcpy(x, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CHECK_RT(cudaMemcpy(w, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  CHECK_RT(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));

  cublasLtHandle_t h;
  CHECK_LT(cublasLtCreate(&h));
  cublasLtMatmulDesc_t op;
  CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
  const __half* bias = b;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  const cudaDataType_t bias_type = CUDA_R_16F;
  CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, k, n, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, m, k));
  CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, n, m, n));
  cublasLtMatmulPreference_t pref;
  CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes,
                                                sizeof kWorkspaceBytes));
  cublasLtMatmulHeuristicResult_t results[kMaxAlgorithms];
  int found = 0;
  CHECK_LT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, kMaxAlgorithms, results, &found));
  std::printf("m=%d n=%d k=%d bias epilogue: %d algorithms\n", m, n, k, found);

  const float alpha = 1.f, beta = 0.f;
  std::vector<__half> got((size_t)m * n);
  int wrong = 0;
  for (int a = 0; a < found; ++a) {
    CHECK_RT(cudaMemsetAsync(y, 0xff, (size_t)m * n * 2, stream));  // NaN: an unwritten value shows
    CHECK_RT(cudaMemsetAsync(ws, 0, kWorkspaceBytes, stream));
    CHECK_LT(cublasLtMatmul(h, op, &alpha, w, la, x, lb, &beta, y, lc, y, lc, &results[a].algo, ws,
                            kWorkspaceBytes, stream));
    CHECK_RT(cudaStreamSynchronize(stream));
    CHECK_RT(cudaMemcpy(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost));
    double max_error = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double e = std::fabs((double)__half2float(got[i]) - want[i]);
      max_error = std::isnan(e) ? INFINITY : std::fmax(max_error, e);
    }
    // fp16 output: half an ulp of the largest |value| (< 2^5 here) plus the fp32 sums' error.
    const bool ok = max_error < 2e-2;
    wrong += !ok;
    std::printf("algorithm %2d: max|error| %.3e %s\n", a, max_error, ok ? "ok" : "WRONG");
  }
  std::printf("%d of %d algorithms wrong\n", wrong, found);
  return wrong == 0 ? 0 : 1;
}
