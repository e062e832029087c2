// ops::release_blas_threads (called by timing-only runs) must leave GEMM working: OpenBLAS starts
// its pool again on the next threaded call. A product large enough for OpenBLAS to split over
// threads, before and after releasing the pool twice, against a double reference.
#include "catch.h"

#include <cmath>

#include "ops_test_util.h"

using namespace ops_test;

namespace {

void check_product() {
  const int64_t M = 192, K = 256, N = 160;
  const auto a = randv(size_t(M * K), -1, 1, DataFormat::IEEE_FP32, 31);
  const auto b = randv(size_t(K * N), -1, 1, DataFormat::IEEE_FP32, 32);
  Buf A(DataFormat::IEEE_FP32, {M, K}, a), B(DataFormat::IEEE_FP32, {K, N}, b);
  Buf O(DataFormat::IEEE_FP32, {M, N});
  ops::matmul(A.v(), B.v(), O.v());
  int bad = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += a[size_t(i * K + k)] * b[size_t(k * N + j)];
        mag += std::fabs(a[size_t(i * K + k)] * b[size_t(k * N + j)]);
      }
      if (std::fabs(O.at(size_t(i * N + j)) - s) > double(K) * 0x1p-23 * mag + 1e-30) ++bad;
    }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ops: GEMM still works after the BLAS worker threads are released", "[ops][blas]") {
  check_product();
  ops::release_blas_threads();
  check_product();
  ops::release_blas_threads();
  ops::release_blas_threads();  // twice in a row: nothing to stop the second time
  check_product();
}
