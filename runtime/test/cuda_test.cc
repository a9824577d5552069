// Tests of the CUDA backend (bt/runtime/cuda.h) without a GPU: the missing
// driver, the CUDA toolkit's stub driver (no GPU behind it), and a fake
// driver + cuBLAS on host memory (fake_cuda.c) for the backend's logic.

#include "bt/runtime/device/cuda/cuda.h"

#include <cstring>
#include <dlfcn.h>
#include <sstream>
#include <vector>

#include "bt/runtime/tooling/commands.h"
#include "test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace bt::rt {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Msg(const absl::Status &s) { return std::string(s.message()); }

CudaOptions Fake() {
  CudaOptions o;
  o.driver_library = BT_FAKE_CUDA;
  o.cublas_libraries = {BT_FAKE_CUDA};
  return o;
}

// The fake's introspection functions.
template <typename Fn> Fn FakeSymbol(const char *name) {
  void *lib = ::dlopen(BT_FAKE_CUDA, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr);
  return reinterpret_cast<Fn>(::dlsym(lib, name));
}

TEST(CudaBackend, MissingDriverIsNotFound) {
  CudaOptions o;
  o.driver_library = "/nonexistent/libcuda.so.1";
  auto b = CudaBackend::Open(o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(b.status()),
              StartsWith("no CUDA driver found: dlopen(/nonexistent/libcuda.so.1)"));
  EXPECT_THAT(DescribeCudaAvailability(o),
              StartsWith("cuda: no CUDA driver found: dlopen("));
}

TEST(CudaBackend, StubDriverHasNoGpu) {
#ifdef BT_CUDA_STUB_DRIVER
  // The toolkit's stub libcuda.so exports the whole driver API; every call
  // fails with CUDA_ERROR_STUB_LIBRARY (a machine without a driver).
  CudaOptions o;
  o.driver_library = BT_CUDA_STUB_DRIVER;
  auto b = CudaBackend::Open(o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(b.status()), StartsWith("no CUDA GPU found: cuInit failed with "
                                          "CUDA_ERROR_STUB_LIBRARY"));
  EXPECT_THAT(Msg(b.status()), HasSubstr(BT_CUDA_STUB_DRIVER));
#else
  GTEST_SKIP() << "no CUDA toolkit stub driver";
#endif
}

TEST(CudaBackend, FakeDriverWithoutDeviceIsUnavailable) {
  ::setenv("BT_FAKE_CUDA_NO_DEVICE", "1", 1);
  auto b = CudaBackend::Open(Fake());
  ::unsetenv("BT_FAKE_CUDA_NO_DEVICE");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(b.status()),
              HasSubstr("no CUDA GPU found: cuInit failed with CUDA_ERROR_NO_DEVICE"));
}

TEST(CudaBackend, BadOrdinal) {
  CudaOptions o = Fake();
  o.device = 3;
  auto b = CudaBackend::Open(o);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(Msg(b.status()), HasSubstr("CUDA device 3 does not exist (1 device(s))"));
}

TEST(CudaBackend, DeviceModuleAndLaunch) {
  auto b = CudaBackend::Open(Fake());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->device().Describe(), "bt fake GPU (sm_90, 1.0 GiB, CUDA driver 13.0)");
  EXPECT_EQ(DescribeCudaAvailability(Fake()),
            "cuda: device 0: bt fake GPU (sm_90, 1.0 GiB, CUDA driver 13.0)");

  void *params[1];
  int64_t value = 42;
  params[0] = &value;
  absl::Status s = (*b)->Launch("k", 1, 1, 1, 32, 1, 1, 0, params);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;

  s = (*b)->LoadModule("not ptx");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Msg(s), HasSubstr("CUDA_ERROR_INVALID_PTX"));
  EXPECT_THAT(Msg(s), HasSubstr("fake ptxas: no .version directive"));

  ASSERT_TRUE((*b)->LoadModule(".version 8.0\n.target sm_90\n.visible .entry k(\n"
                               ".param .u64 p)\n{ ret; }\n")
                  .ok());
  s = (*b)->Launch("missing", 1, 1, 1, 32, 1, 1, 0, params);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("kernel 'missing' is not in the PTX module"));
  s = (*b)->Launch("k", 0, 1, 1, 32, 1, 1, 0, params);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  auto launches = FakeSymbol<int64_t (*)()>("bt_fake_cuda_launches");
  auto last = FakeSymbol<const char *(*)(unsigned *, unsigned *, int64_t *)>(
      "bt_fake_cuda_last_launch");
  int64_t before = launches();
  (*b)->MakeCurrent();
  bt_gpu_launch("k", 7, 2, 3, 128, 1, 1, 640, params, 1);
  CudaBackend::Current()->Synchronize().IgnoreError();
  EXPECT_EQ(launches(), before + 1);
  unsigned dims[6], smem = 0;
  int64_t p0 = 0;
  EXPECT_STREQ(last(dims, &smem, &p0), "k");
  EXPECT_EQ(std::vector<unsigned>(dims, dims + 6),
            (std::vector<unsigned>{7, 2, 3, 128, 1, 1}));
  EXPECT_EQ(smem, 640u);
  EXPECT_EQ(p0, 42);
  (*b)->MakeCurrent();
  b->reset();
  EXPECT_EQ(CudaBackend::Current(), nullptr);
}

TEST(CudaBackend, AllocFreeAndCopiesThroughTheAbi) {
  auto b = CudaBackend::Open(Fake());
  ASSERT_TRUE(b.ok()) << b.status();
  (*b)->MakeCurrent();
  auto allocs = FakeSymbol<int64_t (*)()>("bt_fake_cuda_allocations");
  int64_t before = allocs();
  void *p = bt_gpu_alloc(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  std::vector<float> host = {1, 2, 3, 4};
  ASSERT_TRUE((*b)->CopyToDevice(reinterpret_cast<uintptr_t>(p), host.data(), 16).ok());
  float back[4] = {0};
  bt_gpu_memcpy_dtoh(back, p, 16);
  EXPECT_EQ(std::vector<float>(back, back + 4), host);
  bt_gpu_free(p);
  // The same size class comes from the cache.
  void *q = bt_gpu_alloc(900);
  EXPECT_EQ(q, p);
  EXPECT_EQ(allocs(), before + 1);
  EXPECT_EQ(bt_gpu_alloc(0), nullptr);
  bt_gpu_free(nullptr);
  bt_gpu_free(q);
  b->reset();
}

// Row-major reference: C = alpha·op(A)·op(B) + beta·C.
void ReferenceSgemm(bool ta, bool tb, int m, int n, int k, float alpha,
                    const std::vector<float> &a, int lda,
                    const std::vector<float> &b, int ldb, float beta,
                    std::vector<float> &c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0;
      for (int p = 0; p < k; ++p)
        acc += (ta ? a[p * lda + i] : a[i * lda + p]) *
               (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * acc + beta * c[i * ldc + j];
    }
}

TEST(CudaBackend, SgemmIsRowMajorCblas) {
  auto b = CudaBackend::Open(Fake());
  ASSERT_TRUE(b.ok()) << b.status();
  (*b)->MakeCurrent();
  const int m = 3, n = 5, k = 4;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Leading dims larger than the rows (strided views, as the kernels
      // pass them).
      int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n + 3;
      std::vector<float> a((ta ? k : m) * lda), bm((tb ? n : k) * ldb),
          c(m * ldc), expected;
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = static_cast<float>((i * 7) % 11) - 5;
      for (size_t i = 0; i < bm.size(); ++i)
        bm[i] = static_cast<float>((i * 5) % 13) - 6;
      for (size_t i = 0; i < c.size(); ++i)
        c[i] = static_cast<float>(i % 3);
      expected = c;
      ReferenceSgemm(ta, tb, m, n, k, 1.5f, a, lda, bm, ldb, 0.5f, expected, ldc);
      bt_gpu_sgemm(101, ta ? 112 : 111, tb ? 112 : 111, m, n, k, 1.5f, a.data(),
                   lda, bm.data(), ldb, 0.5f, c.data(), ldc);
      EXPECT_EQ(c, expected) << "transA " << ta << " transB " << tb;
    }
  // FP32 math (no TF32).
  EXPECT_EQ(FakeSymbol<int (*)()>("bt_fake_cublas_math_mode")(), 0);
  absl::Status s = (*b)->Sgemm(102, 111, 111, 1, 1, 1, 1, nullptr, 1, nullptr,
                               1, 0, nullptr, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  b->reset();
}

TEST(CudaBackend, MissingCublas) {
  CudaOptions o = Fake();
  o.cublas_libraries = {"/nonexistent/libcublas.so.13"};
  auto b = CudaBackend::Open(o);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::Status s = (*b)->Sgemm(101, 111, 111, 1, 1, 1, 1, nullptr, 1, nullptr,
                               1, 0, nullptr, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("cuBLAS not found: /nonexistent/libcublas.so.13"));
}

TEST(CudaAbiDeathTest, NoBackendIsAClearAbort) {
  ASSERT_EQ(CudaBackend::Current(), nullptr);
  EXPECT_DEATH(bt_gpu_alloc(16),
               "bt: bt_gpu_alloc: no CUDA backend is active");
  EXPECT_DEATH(bt_gpu_launch("k", 1, 1, 1, 1, 1, 1, 0, nullptr, 0),
               "bt: bt_gpu_launch: no CUDA backend is active");
}

//===----------------------------------------------------------------------===//
// DevicePool with a counting allocator
//===----------------------------------------------------------------------===//

struct Counting {
  int64_t next = 0x10000, allocs = 0, frees = 0, fail_next = 0;
  DevicePool Make() {
    return DevicePool(
        [this](uint64_t bytes) -> absl::StatusOr<uint64_t> {
          if (fail_next > 0) {
            --fail_next;
            return absl::ResourceExhaustedError("out of memory");
          }
          ++allocs;
          uint64_t a = next;
          next += (bytes + 255) / 256 * 256 + 256;
          return a;
        },
        [this](uint64_t) { ++frees; });
  }
};

TEST(DevicePool, RoundsAndReusesBySizeClass) {
  EXPECT_EQ(DevicePool::Rounded(1), 256u);
  EXPECT_EQ(DevicePool::Rounded(256), 256u);
  EXPECT_EQ(DevicePool::Rounded(257), 512u);
  EXPECT_EQ(DevicePool::Rounded((1u << 20) + 1), 2u << 20);
  Counting c;
  {
    DevicePool pool = c.Make();
    auto a = pool.Allocate(300);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(pool.bytes_in_use(), 512);
    ASSERT_TRUE(pool.Free(*a).ok());
    EXPECT_EQ(pool.bytes_cached(), 512);
    auto b = pool.Allocate(400); // same class: reused
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, *a);
    EXPECT_EQ(c.allocs, 1);
    auto d = pool.Allocate(100); // another class
    ASSERT_TRUE(d.ok());
    EXPECT_NE(*d, *a);
    EXPECT_EQ(pool.device_allocations(), 2);
    EXPECT_EQ(pool.Allocate(0).value(), 0u);
    EXPECT_TRUE(pool.Free(0).ok());
    ASSERT_TRUE(pool.Free(*d).ok());
    absl::Status twice = pool.Free(*d);
    EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(twice), HasSubstr("not a block of the device memory pool"));
    EXPECT_EQ(pool.Free(12345).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(pool.device_frees(), 0); // cached, not freed
    pool.Trim();
    EXPECT_EQ(pool.bytes_cached(), 0);
    EXPECT_EQ(c.frees, 1);
    EXPECT_EQ(pool.device_frees(), 1);
  }
  // The destructor releases the block still in use.
  EXPECT_EQ(c.frees, 2);
}

TEST(DeviceTraffic, SinceAndSumCoverTheDriverAllocations) {
  DeviceTraffic a, b;
  a.driver_allocations = 7;
  a.driver_frees = 3;
  a.device_copies = 5;
  b.driver_allocations = 2;
  b.driver_frees = 1;
  b.device_copies = 4;
  const DeviceTraffic d = a.Since(b);
  EXPECT_EQ(d.driver_allocations, 5);
  EXPECT_EQ(d.driver_frees, 2);
  EXPECT_EQ(d.device_copies, 1);
  DeviceTraffic sum = d;
  sum += b;
  EXPECT_EQ(sum.driver_allocations, 7);
  EXPECT_EQ(sum.driver_frees, 3);
  // Not launches: the H100 launch model does not charge them.
  EXPECT_EQ(sum.host_launches(), 5);
}

TEST(DevicePool, ReleasesTheCacheAndRetriesWhenTheDeviceIsFull) {
  Counting c;
  DevicePool pool = c.Make();
  auto a = pool.Allocate(1000);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pool.Free(*a).ok());
  c.fail_next = 1;
  auto b = pool.Allocate(5000); // fails once, cache released, retried
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(c.frees, 1);
  EXPECT_EQ(pool.device_frees(), 1);
  EXPECT_EQ(pool.bytes_cached(), 0);
  c.fail_next = 2;
  auto d = pool.Allocate(7000);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Msg(d.status()), HasSubstr("cannot allocate 7000 bytes of device memory"));
  EXPECT_EQ(pool.Allocate(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

//===----------------------------------------------------------------------===//
// CallDeviceEntryPoint / CallDeviceEntryPointResident on their own
//===----------------------------------------------------------------------===//

// MLIR's StridedMemRefType<float, 2>, as the host code receives and returns
// descriptors (docs/abi.md).
struct Memref2 {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
};

// A hand-written entry point of the CUDA-target ABI (docs/abi.md, "Kernel
// library (CUDA target)"): params w F32 [4, 3]; inputs x F32 [2, 3], acc
// F32 [2, 4] (in-out); output y F32 [2, 4]. y = x · wᵀ into columns 2..5 of
// a fresh [2, 8] block (offset 2, strides [8, 1]: a strided output, as
// prefill's context view), acc += x · wᵀ in place; through bt_gpu_alloc and
// bt_gpu_sgemm only (the host code never touches device memory). With
// g_wrong_rows set it returns y with 3 rows (against the spec's static 2).
bool g_wrong_rows = false;
void ProjectEntry(void **argv) {
  auto *y = static_cast<Memref2 *>(argv[0]);
  const auto *w = static_cast<const Memref2 *>(argv[1]);
  const auto *x = static_cast<const Memref2 *>(argv[2]);
  auto *acc = static_cast<Memref2 *>(argv[3]);
  float *block = static_cast<float *>(bt_gpu_alloc(2 * 8 * sizeof(float)));
  // CBLAS row-major (101), no transpose (111), transpose (112).
  bt_gpu_sgemm(101, 111, 112, 2, 4, 3, 1.0f, x->aligned + x->offset, 3,
               w->aligned + w->offset, 3, 0.0f, block + 2, 8);
  bt_gpu_sgemm(101, 111, 112, 2, 4, 3, 1.0f, x->aligned + x->offset, 3,
               w->aligned + w->offset, 3, 1.0f, acc->aligned + acc->offset, 4);
  *y = Memref2{block, block, 2, {g_wrong_rows ? 3 : 2, 4}, {8, 1}};
}

proto::EntryPoint ProjectSpec() {
  proto::EntryPoint ep;
  ep.set_name("project");
  ep.set_symbol("bt_entry_project");
  ep.add_params("w");
  auto spec = [](proto::TensorSpec *t, const char *name,
                 std::vector<int64_t> shape, bool inout) {
    t->set_name(name);
    t->set_dtype(proto::F32);
    for (int64_t d : shape)
      t->add_shape(d);
    t->set_inout(inout);
  };
  spec(ep.add_inputs(), "x", {2, 3}, false);
  spec(ep.add_inputs(), "acc", {2, 4}, true);
  spec(ep.add_outputs(), "y", {2, 4}, false);
  return ep;
}

// x · wᵀ + acc0 (acc0 = 0: the product alone), row-major [2, 4].
std::vector<float> Projected(const std::vector<float> &x,
                             const std::vector<float> &w,
                             std::vector<float> acc0) {
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        acc0[i * 4 + j] += x[i * 3 + k] * w[j * 3 + k];
  return acc0;
}

TEST(CallDeviceEntryPoint, StridedOutputInOutCopyBackAndPoolRelease) {
  auto b = CudaBackend::Open(Fake());
  ASSERT_TRUE(b.ok()) << b.status();
  CudaBackend &gpu = **b;
  const std::vector<float> wv = {1, 0, 2, -1, 3, 0.5f, 0, 0, 1, 2, 2, 2};
  const std::vector<float> xv = {1, 2, 3, -1, 0.25f, 4};
  const std::vector<float> acc0 = {1, 2, 3, 4, 5, 6, 7, 8};
  Tensor w_host = testing::MakeF32({4, 3}, wv);
  absl::StatusOr<DeviceTensor> w = UploadTensor(gpu, w_host);
  ASSERT_TRUE(w.ok()) << w.status();
  const int64_t in_use = gpu.pool().bytes_in_use(); // the weight's block
  const proto::EntryPoint ep = ProjectSpec();
  const DeviceTensor *params[] = {&*w};

  Tensor x = testing::MakeF32({2, 3}, xv);
  Tensor acc = testing::MakeF32({2, 4}, acc0);
  Tensor *inputs[] = {&x, &acc};
  g_wrong_rows = false;
  absl::StatusOr<std::vector<Tensor>> out =
      CallDeviceEntryPoint(gpu, ProjectEntry, ep, params, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{2, 4}));
  // The strided view gathered into a dense host tensor.
  EXPECT_EQ(testing::F32Values((*out)[0]), Projected(xv, wv, {0, 0, 0, 0, 0, 0, 0, 0}));
  // The in-out input: updated on the device, copied back into its tensor.
  EXPECT_EQ(testing::F32Values(acc), Projected(xv, wv, acc0));
  EXPECT_EQ(testing::F32Values(x), xv); // an input is not copied back
  // Every block of the call (x, acc, the output's) back in the pool.
  EXPECT_EQ(gpu.pool().bytes_in_use(), in_use);

  // The same call with resident outputs: the strided one made dense in a new
  // block, which the caller owns (and releases) once.
  acc = testing::MakeF32({2, 4}, acc0);
  DeviceArg args[] = {{&x, nullptr}, {&acc, nullptr}};
  absl::StatusOr<std::vector<ResidentOutput>> resident =
      CallDeviceEntryPointResident(gpu, ProjectEntry, ep, params, args);
  ASSERT_TRUE(resident.ok()) << resident.status();
  ASSERT_EQ(resident->size(), 1u);
  const ResidentOutput &y = (*resident)[0];
  EXPECT_EQ(y.tensor.shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(y.block, y.tensor.address);
  std::vector<float> dense(8);
  ASSERT_TRUE(gpu.CopyToHost(dense.data(), y.tensor.address, 8 * sizeof(float)).ok());
  EXPECT_EQ(dense, Projected(xv, wv, {0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(testing::F32Values(acc), Projected(xv, wv, acc0));
  EXPECT_EQ(gpu.pool().bytes_in_use(), in_use + DevicePool::Rounded(8 * sizeof(float)));
  ASSERT_TRUE(gpu.pool().Free(y.block).ok());
  EXPECT_EQ(gpu.pool().bytes_in_use(), in_use);

  // An output that contradicts its spec's static dim: an error naming the
  // entry and the output, and the call's blocks released all the same.
  g_wrong_rows = true;
  out = CallDeviceEntryPoint(gpu, ProjectEntry, ep, params, inputs);
  g_wrong_rows = false;
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(out.status()), HasSubstr("entry point 'project'"));
  EXPECT_THAT(Msg(out.status()), HasSubstr("'y'"));
  EXPECT_EQ(gpu.pool().bytes_in_use(), in_use);

  // A missing parameter and a wrong input dtype are named before any call.
  const DeviceTensor *none[] = {nullptr};
  out = CallDeviceEntryPoint(gpu, ProjectEntry, ep, none, inputs);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(Msg(out.status()), HasSubstr("param 'w' is missing"));
  Tensor ids = testing::MakeI64({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor *bad[] = {&ids, &acc};
  out = CallDeviceEntryPoint(gpu, ProjectEntry, ep, params, bad);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(out.status()), HasSubstr("'x'"));
  EXPECT_EQ(gpu.pool().bytes_in_use(), in_use);
  ASSERT_TRUE(gpu.pool().Free(w->address).ok());
  b->reset();
}

//===----------------------------------------------------------------------===//
// bt-launcher devices
//===----------------------------------------------------------------------===//

TEST(LauncherDevices, SaysWhetherAGpuWasFound) {
  ::setenv("BT_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  const char *argv[] = {"bt-launcher", "devices"};
  std::ostringstream out, err;
  EXPECT_EQ(LauncherMain(2, argv, out, err), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("cpu: "));
  EXPECT_THAT(out.str(), HasSubstr("cuda: no CUDA driver found: dlopen(/nonexistent/libcuda.so.1)"));
  ::setenv("BT_CUDA_DRIVER", BT_FAKE_CUDA, 1);
  std::ostringstream out2;
  EXPECT_EQ(LauncherMain(2, argv, out2, err), 0) << err.str();
  EXPECT_THAT(out2.str(), HasSubstr("cuda: device 0: bt fake GPU (sm_90"));
  ::unsetenv("BT_CUDA_DRIVER");
  const char *bad[] = {"bt-launcher", "devices", "--x"};
  EXPECT_EQ(LauncherMain(3, bad, out, err), 2);
}

} // namespace
} // namespace bt::rt
