//===- kernels_test.cc ----------------------------------------------------===//
//
// The kernel ABI (docs/abi.md) against test_kernels.c, a hand-written library
// built by CMake and loaded here from its bytes, as the runtime loads an
// artifact's kernels section.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/device/kernels.h"

#include <cstdlib>
#include <dlfcn.h>

#include "bt/runtime/device/cpu/cpu_device.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

std::string KernelBytes() { return testing::ReadRaw(BT_TEST_KERNELS); }

// Resolves ep.symbol() in `lib` and calls it on host buffers (the CPU device).
absl::StatusOr<std::vector<Tensor>> Call(const KernelLibrary &lib,
                                         const proto::EntryPoint &ep,
                                         absl::Span<const Tensor *const> params,
                                         absl::Span<const Tensor *const> inputs) {
  absl::StatusOr<KernelEntryFn> fn = lib.Resolve(ep.symbol());
  if (!fn.ok())
    return fn.status();
  return CallEntryPoint(*fn, ep, params, inputs);
}

proto::TensorSpec Spec(const std::string &name, DType dtype, std::vector<int64_t> shape) {
  proto::TensorSpec s;
  s.set_name(name);
  s.set_dtype(dtype);
  for (int64_t d : shape)
    s.add_shape(d);
  return s;
}

proto::EntryPoint Entry(const std::string &name, std::vector<proto::TensorSpec> inputs,
                        std::vector<proto::TensorSpec> outputs) {
  proto::EntryPoint ep;
  ep.set_name(name);
  ep.set_symbol("bt_entry_" + name);
  for (auto &s : inputs)
    *ep.add_inputs() = s;
  for (auto &s : outputs)
    *ep.add_outputs() = s;
  return ep;
}

std::unique_ptr<KernelLibrary> LoadTestLibrary() {
  auto lib = KernelLibrary::Load(KernelBytes(), "test_kernels");
  EXPECT_THAT(lib.status(), IsOk());
  return lib.ok() ? std::move(lib).value() : nullptr;
}

TEST(Kernels, LoadsFromMemfdAndChecksAbiVersion) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(lib->load_method(), "memfd");
  EXPECT_THAT(lib->Resolve("bt_entry_add").status(), IsOk());
  EXPECT_THAT(lib->Resolve("bt_entry_nope").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "test_kernels: the kernel library does not export 'bt_entry_nope'"));
  EXPECT_THAT(KernelLibrary::Load(testing::ReadRaw(BT_TEST_KERNELS_BADABI), "bad").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "bad: kernel ABI version 7, this runtime implements version 1"));
}

TEST(Kernels, TmpfileFallback) {
  ::setenv("BT_KERNELS_NO_MEMFD", "1", 1);
  auto lib = KernelLibrary::Load(KernelBytes(), "fallback");
  ::unsetenv("BT_KERNELS_NO_MEMFD");
  ASSERT_THAT(lib.status(), IsOk());
  EXPECT_EQ((*lib)->load_method(), "tmpfile");
  EXPECT_THAT((*lib)->Resolve("bt_entry_split").status(), IsOk());
}

TEST(Kernels, RejectsNonLibraries) {
  EXPECT_THAT(KernelLibrary::Load("", "k").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "k: the kernel library is empty"));
  EXPECT_THAT(KernelLibrary::Load("hello world", "k").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "not an ELF shared object"));
  std::string truncated = KernelBytes().substr(0, 200);
  EXPECT_THAT(KernelLibrary::Load(truncated, "k").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "k: cannot load the kernel library"));
  // An ELF library without bt_kernel_abi_version: the gtest-free C runtime
  // is not at hand, so use libm (always present) through its bytes.
  std::string libm = testing::ReadRaw("/lib/x86_64-linux-gnu/libm.so.6");
  if (!libm.empty())
    EXPECT_THAT(KernelLibrary::Load(libm, "libm").status(),
                StatusIs(absl::StatusCode::kInvalidArgument, "does not export bt_kernel_abi_version"));
}

TEST(Kernels, CallAdd) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  proto::EntryPoint ep = Entry("add",
                               {Spec("a", proto::F32, {-1, 3}), Spec("b", proto::F32, {-1, 3})},
                               {Spec("sum", proto::F32, {-1, 3})});
  Tensor a = testing::MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = testing::MakeF32({2, 3}, {10, 20, 30, 40, 50, 60});
  auto out = Call(*lib, ep, {}, {&a, &b});
  ASSERT_THAT(out.status(), IsOk());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].shape(), std::vector<int64_t>({2, 3}));
  EXPECT_TRUE((*out)[0].has_owner());
  EXPECT_EQ(testing::F32Values((*out)[0]), std::vector<float>({11, 22, 33, 44, 55, 66}));

  // Argument checks before the call.
  EXPECT_THAT(Call(*lib, ep, {}, {&a}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "entry point 'add' takes 2 inputs, got 1"));
  Tensor i = testing::MakeI64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THAT(Call(*lib, ep, {}, {&a, &i}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'add': input 'b' is I64[2, 3], expected F32 of rank 2"));
  EXPECT_THAT(Call(*lib, ep, {&a}, {&a, &b}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "takes 0 params, got 1"));
  proto::EntryPoint missing = ep;
  missing.set_symbol("bt_entry_missing");
  EXPECT_THAT(Call(*lib, missing, {}, {&a, &b}).status(),
              StatusIs(absl::StatusCode::kNotFound, "bt_entry_missing"));
}

TEST(Kernels, CallSplitReturnsOutputsOfDifferentRanks) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  proto::EntryPoint ep = Entry("split", {Spec("x", proto::F32, {-1, -1})},
                               {Spec("rowsum", proto::F32, {-1}), Spec("total", proto::F32, {})});
  Tensor x = testing::MakeF32({3, 2}, {1, 2, 3, 4, 5, 6});
  auto out = Call(*lib, ep, {}, {&x});
  ASSERT_THAT(out.status(), IsOk());
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(testing::F32Values((*out)[0]), std::vector<float>({3, 7, 11}));
  EXPECT_EQ((*out)[1].rank(), 0);
  EXPECT_EQ(testing::F32Values((*out)[1]), std::vector<float>({21}));
}

TEST(Kernels, NonDenseOutputIsCopiedToDense) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  proto::EntryPoint ep = Entry("transpose", {Spec("x", proto::F32, {-1, -1})},
                               {Spec("y", proto::F32, {-1, -1})});
  Tensor x = testing::MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = Call(*lib, ep, {}, {&x});
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ((*out)[0].shape(), std::vector<int64_t>({3, 2}));
  EXPECT_EQ(testing::F32Values((*out)[0]), std::vector<float>({1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*out)[0].data()) % kTensorAlignment, 0u);
}

TEST(Kernels, OutputsSharingOneBufferAreFreedOnce) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  proto::EntryPoint ep = Entry("halves", {Spec("x", proto::F32, {-1})},
                               {Spec("lo", proto::F32, {-1}), Spec("hi", proto::F32, {-1})});
  Tensor x = testing::MakeF32({4}, {1, 2, 3, 4});
  auto out = Call(*lib, ep, {}, {&x});
  ASSERT_THAT(out.status(), IsOk());
  Tensor hi = std::move((*out)[1]);
  out->clear(); // drops lo; hi keeps the shared buffer alive
  EXPECT_EQ(testing::F32Values(hi), std::vector<float>({3, 4}));
}

TEST(Kernels, OutputContradictingItsStaticShapeIsAnError) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  proto::EntryPoint ep = Entry("wrong_shape", {Spec("x", proto::F32, {2, 2})},
                               {Spec("y", proto::F32, {2, 2})});
  Tensor x = testing::MakeF32({2, 2}, {1, 2, 3, 4});
  EXPECT_THAT(Call(*lib, ep, {}, {&x}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "entry point 'wrong_shape': output 'y' has shape [3, 2], expected [2, 2]"));
}

TEST(Kernels, TwoLoadsAreIndependent) {
  auto a = LoadTestLibrary(), b = LoadTestLibrary();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(*a->Resolve("bt_entry_add"), *b->Resolve("bt_entry_add"));
  a.reset();
  proto::EntryPoint ep = Entry("split", {Spec("x", proto::F32, {-1, -1})},
                               {Spec("rowsum", proto::F32, {-1}), Spec("total", proto::F32, {})});
  Tensor x = testing::MakeF32({1, 2}, {1, 2});
  EXPECT_THAT(Call(*b, ep, {}, {&x}).status(), IsOk());
}

// glibc hands out an already loaded object for an equal path name; fd
// numbers are reused, so a new library must never be confused with an old one.
TEST(Kernels, FdReuseNeverReturnsAnotherLibrary) {
  const std::string bad = testing::ReadRaw(BT_TEST_KERNELS_BADABI);
  {
    auto good = LoadTestLibrary();
    ASSERT_NE(good, nullptr);
  } // unloaded; its fd number is free again
  EXPECT_THAT(KernelLibrary::Load(bad, "bad").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "kernel ABI version 7"));

  // A library that can never be unloaded (pinned with RTLD_NODELETE) keeps
  // its "/proc/self/fd/N" name in the loaded list after dlclose.
  std::string pinned_path;
  {
    auto good = LoadTestLibrary();
    ASSERT_NE(good, nullptr);
    pinned_path = good->load_path();
    void *pin = ::dlopen(pinned_path.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    ASSERT_NE(pin, nullptr);
    ::dlclose(pin);
  }
  for (int i = 0; i < 3; ++i) {
    auto lib = KernelLibrary::Load(bad, "bad");
    EXPECT_THAT(lib.status(),
                StatusIs(absl::StatusCode::kFailedPrecondition, "kernel ABI version 7"));
  }
}

// The library leaves cblas_sgemm undefined; it resolves to the OpenBLAS the
// runtime links (global scope of this process).
TEST(Kernels, BlasResolvesAgainstTheProcess) {
  auto lib = LoadTestLibrary();
  ASSERT_NE(lib, nullptr);
  proto::EntryPoint ep = Entry("matmul",
                               {Spec("a", proto::F32, {-1, -1}), Spec("b", proto::F32, {-1, -1})},
                               {Spec("c", proto::F32, {-1, -1})});
  Tensor a = testing::MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = testing::MakeF32({3, 2}, {1, 0, 0, 1, 1, 1});
  auto out = Call(*lib, ep, {}, {&a, &b});
  ASSERT_THAT(out.status(), IsOk());
  EXPECT_EQ(testing::F32Values((*out)[0]), std::vector<float>({4, 5, 10, 11}));
}

TEST(Kernels, DescriptorWords) {
  EXPECT_EQ(MemRefDescriptorWords(0), 3);
  EXPECT_EQ(MemRefDescriptorWords(3), 9);
}

// Device::CopyOnDevice on the CPU device (the checks are the interface's,
// shared with cuda): dtype and element count must agree, and the ranges
// must be equal or disjoint.
TEST(CpuDevice, CopyOnDeviceChecksDtypeCountAndOverlap) {
  CpuDevice device;
  auto t = device.Allocate(DType::F32, {4, 3});
  ASSERT_THAT(t.status(), IsOk());
  float *p = reinterpret_cast<float *>(t->address);
  for (int i = 0; i < 12; ++i)
    p[i] = static_cast<float>(i);
  auto rows = [&](int64_t r, int64_t n) {
    return DeviceTensor{t->address + static_cast<uint64_t>(r) * 12,
                        DType::F32, {n, 3}};
  };
  // Rows 2..3 -> rows 0..1, viewed as [6]: a different shape, same count.
  DeviceTensor flat{t->address, DType::F32, {6}};
  ASSERT_THAT(device.CopyOnDevice(rows(2, 2), flat), IsOk());
  EXPECT_EQ(std::vector<float>(p, p + 6),
            std::vector<float>({6, 7, 8, 9, 10, 11}));
  EXPECT_THAT(device.CopyOnDevice(rows(0, 2), rows(0, 2)), IsOk());
  EXPECT_THAT(device.CopyOnDevice(rows(1, 2), rows(0, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "overlap"));
  EXPECT_THAT(device.CopyOnDevice(rows(2, 2), rows(0, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cpu: copying F32[2, 3] into F32[1, 3]"));
  DeviceTensor ints{t->address, DType::I32, {2, 3}};
  EXPECT_THAT(device.CopyOnDevice(rows(2, 2), ints),
              StatusIs(absl::StatusCode::kInvalidArgument, "into I32[2, 3]"));
  device.Release(*t);
}

} // namespace
} // namespace bt::rt
