//===- safetensors_test.cc ------------------------------------------------===//

#include "bt/runtime/base/safetensors.h"

#include <cstring>
#include <sys/stat.h>

#include "bt/runtime/base/file_util.h"
#include "nlohmann/json.hpp"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

// A safetensors file from a raw header string and data bytes.
std::string RawSafetensors(const std::string &header, const std::string &data) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

TEST(Safetensors, RoundTrip) {
  testing::TempDir dir;
  Tensor a = testing::MakeF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = testing::MakeI64({4}, {-1, 0, 7, 1LL << 40});
  Tensor s = testing::MakeF32({}, {3.5f});
  auto h = Tensor::Allocate(proto::BF16, {3});
  ASSERT_THAT(h.status(), IsOk());
  h->data_as<uint16_t>()[2] = 0x3f80;
  auto e = Tensor::Allocate(proto::F32, {0, 5});
  ASSERT_THAT(e.status(), IsOk());
  const std::string path = dir.File("x.safetensors");
  ASSERT_THAT(WriteSafetensors(path,
                               {{"zeta", &a}, {"alpha", &b}, {"scalar", &s},
                                {"half", &*h}, {"empty", &*e}},
                               {{"what", "test"}, {"k", "v"}}),
              IsOk());

  // Header: sorted names, __metadata__ first, padded to 8 with spaces.
  std::string raw = testing::ReadRaw(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header = raw.substr(8, n);
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"k\":\"v\",\"what\":\"test\"}", 0), 0u);
  EXPECT_LT(header.find("\"alpha\""), header.find("\"empty\""));
  EXPECT_LT(header.find("\"scalar\""), header.find("\"zeta\""));
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));

  auto f = SafetensorsFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->names(), std::vector<std::string>(
                            {"alpha", "empty", "half", "scalar", "zeta"}));
  EXPECT_EQ(f->metadata().at("what"), "test");
  auto za = f->Get("zeta");
  ASSERT_THAT(za.status(), IsOk());
  EXPECT_EQ(za->shape(), std::vector<int64_t>({2, 3}));
  EXPECT_EQ(testing::F32Values(*za), testing::F32Values(a));
  EXPECT_EQ(testing::I64Values(*f->Get("alpha")), testing::I64Values(b));
  EXPECT_EQ(f->Get("scalar")->rank(), 0);
  EXPECT_EQ(testing::F32Values(*f->Get("scalar"))[0], 3.5f);
  EXPECT_EQ(f->Get("half")->dtype(), proto::BF16);
  EXPECT_EQ(f->Get("half")->data_as<uint16_t>()[2], 0x3f80);
  EXPECT_EQ(f->Get("empty")->num_elements(), 0);
  EXPECT_THAT(f->Get("nope").status(),
              StatusIs(absl::StatusCode::kNotFound, "no tensor 'nope'"));

  // A view outlives the file object (the mapping is kept alive).
  Tensor view = std::move(za).value();
  f = absl::InternalError("dropped");
  EXPECT_EQ(testing::F32Values(view)[5], 6.0f);

  // Written atomically: no temporary file is left behind; mode 0644.
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(::stat((path + ".tmp").c_str(), &st), -1);
}

TEST(Safetensors, WriterRejectsBadInput) {
  testing::TempDir dir;
  Tensor a = testing::MakeF32({1}, {1});
  Tensor empty;
  EXPECT_THAT(WriteSafetensors(dir.File("a"), {{"x", &a}, {"x", &a}}),
              StatusIs(absl::StatusCode::kInvalidArgument, "duplicate tensor name 'x'"));
  EXPECT_THAT(WriteSafetensors(dir.File("a"), {{"__metadata__", &a}}),
              StatusIs(absl::StatusCode::kInvalidArgument, "reserved"));
  EXPECT_THAT(WriteSafetensors(dir.File("a"), {{"", &a}}),
              StatusIs(absl::StatusCode::kInvalidArgument, "empty tensor name"));
  EXPECT_THAT(WriteSafetensors(dir.File("a"), {{"e", &empty}}),
              StatusIs(absl::StatusCode::kInvalidArgument, "'e'"));
  EXPECT_THAT(WriteSafetensors(dir.File("no/such/dir/a"), {{"x", &a}}),
              StatusIs(absl::StatusCode::kNotFound, "no/such/dir/a"));
}

TEST(Safetensors, OverwriteIsAtomicReplacement) {
  testing::TempDir dir;
  const std::string path = dir.File("w.safetensors");
  Tensor a = testing::MakeF32({1}, {1});
  Tensor b = testing::MakeF32({2}, {2, 3});
  ASSERT_THAT(WriteSafetensors(path, {{"a", &a}}), IsOk());
  ASSERT_THAT(WriteSafetensors(path, {{"b", &b}}), IsOk());
  auto f = SafetensorsFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->names(), std::vector<std::string>({"b"}));
}

TEST(Safetensors, UnalignedDataIsCopied) {
  // A U8 tensor of 1 byte shifts the F32 tensor to an odd offset.
  testing::TempDir dir;
  std::string header =
      R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[1,5]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  float v = 2.5f;
  std::string data(1, '\x07');
  data.append(reinterpret_cast<const char *>(&v), 4);
  testing::WriteRaw(dir.File("u.safetensors"), RawSafetensors(header, data));
  auto f = SafetensorsFile::Open(dir.File("u.safetensors"));
  ASSERT_THAT(f.status(), IsOk());
  auto b = f->Get("b");
  ASSERT_THAT(b.status(), IsOk());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 4, 0u);
  EXPECT_EQ(testing::F32Values(*b)[0], 2.5f);
}

struct Malformed {
  const char *name;
  std::string bytes;
  const char *expected; // substring of the error message
};

std::vector<Malformed> MalformedCases() {
  auto hdr = [](std::string h, std::string data = std::string(16, '\0')) {
    return RawSafetensors(h, data);
  };
  std::string huge_len(8, '\0');
  uint64_t big = 200'000'000;
  std::memcpy(huge_len.data(), &big, 8);
  std::string past_eof(8, '\0');
  uint64_t n = 100;
  std::memcpy(past_eof.data(), &n, 8);
  past_eof += "{}";
  return {
      {"empty_file", "", "shorter than the 8-byte header"},
      {"seven_bytes", std::string(7, '\0'), "shorter than the 8-byte header"},
      {"header_past_eof", past_eof, "runs past the end of the file"},
      {"header_absurd", huge_len + "{}", "exceeds the limit"},
      {"not_json", hdr("{not json"), "not valid JSON"},
      {"not_utf8", hdr("{\"\xff\xfe\":1}"), "not valid JSON"},
      {"json_array", hdr("[1, 2, 3]"), "expected an object"},
      {"entry_not_object", hdr(R"({"t": 5})"), "tensor 't': entry is a JSON number"},
      {"missing_dtype", hdr(R"({"t":{"shape":[1],"data_offsets":[0,4]}})"),
       "tensor 't': missing 'dtype'"},
      {"unknown_dtype", hdr(R"({"t":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})"),
       "tensor 't': unsupported dtype 'Q7'"},
      {"dtype_not_string", hdr(R"({"t":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})"),
       "tensor 't': 'dtype' is not a string"},
      {"missing_shape", hdr(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})"),
       "tensor 't': missing 'shape'"},
      {"negative_dim", hdr(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})"),
       "tensor 't': 'shape' must be non-negative integers"},
      {"float_dim", hdr(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})"),
       "tensor 't': 'shape' must be non-negative integers"},
      {"shape_not_array", hdr(R"({"t":{"dtype":"F32","shape":4,"data_offsets":[0,4]}})"),
       "tensor 't': 'shape' is not an array"},
      {"missing_offsets", hdr(R"({"t":{"dtype":"F32","shape":[1]}})"),
       "tensor 't': missing 'data_offsets'"},
      {"offsets_three", hdr(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})"),
       "tensor 't': 'data_offsets' must be [begin, end]"},
      {"offsets_negative", hdr(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})"),
       "tensor 't': 'data_offsets' must be [begin, end]"},
      {"offsets_reversed", hdr(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})"),
       "tensor 't': data_offsets [8,4]: begin is after end"},
      {"offsets_past_data", hdr(R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[4,20]}})"),
       "tensor 't': data_offsets [4,20] run past the data region (16 bytes)"},
      {"size_mismatch", hdr(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})"),
       "tensor 't': data_offsets [0,8] hold 8 bytes, but F32[3] needs 12"},
      {"overlap",
       hdr(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
       "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
      {"duplicate_name",
       hdr(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
           R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})"),
       "lists 'a' twice"},
      {"metadata_not_strings", hdr(R"({"__metadata__":{"k":1}})"),
       "__metadata__['k'] is a number"},
      {"huge_shape",
       hdr(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})"),
       "tensor 't': shape [4294967296, 4294967296] is too large"},
  };
}

TEST(Safetensors, RejectsEveryMalformedFile) {
  testing::TempDir dir;
  for (const Malformed &m : MalformedCases()) {
    SCOPED_TRACE(m.name);
    const std::string path = dir.File(std::string(m.name) + ".safetensors");
    testing::WriteRaw(path, m.bytes);
    auto f = SafetensorsFile::Open(path);
    ASSERT_FALSE(f.ok()) << m.name;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(f.status().message()), HasSubstr(path));
    EXPECT_THAT(std::string(f.status().message()), HasSubstr(m.expected));
  }
}

TEST(Safetensors, MissingFile) {
  EXPECT_THAT(SafetensorsFile::Open("/nonexistent/x.safetensors").status(),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/x.safetensors"));
  testing::TempDir dir;
  EXPECT_THAT(SafetensorsFile::Open(dir.path()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is a directory, expected a regular file"));
}

// Every safetensors file of every fixture case opens, every tensor reads, and
// re-serializing reproduces the same header, padding and data bytes (same
// writer conventions: sorted names, compact JSON, space padding to 8).
TEST(Safetensors, ReadsEveryFixtureFile) {
  int files = 0;
  for (const std::string &c : testing::FixtureCases()) {
    for (const char *name :
         {"model.safetensors", "inputs.safetensors", "outputs.safetensors",
          "adamw_step.safetensors", "generate.safetensors",
          "generate_eos.safetensors"}) {
      const std::string path = c + "/" + name;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0)
        continue;
      SCOPED_TRACE(path);
      auto f = SafetensorsFile::Open(path);
      ASSERT_THAT(f.status(), IsOk());
      ++files;
      std::vector<Tensor> tensors;
      std::vector<NamedTensorRef> refs;
      for (const std::string &n : f->names()) {
        auto t = f->Get(n);
        ASSERT_THAT(t.status(), IsOk());
        EXPECT_TRUE(t->dtype() == proto::F32 || t->dtype() == proto::I64)
            << n << " " << t->DebugString();
        tensors.push_back(std::move(t).value());
      }
      for (size_t i = 0; i < tensors.size(); ++i)
        refs.emplace_back(f->names()[i], &tensors[i]);
      auto bytes = SerializeSafetensors(refs, f->metadata());
      ASSERT_THAT(bytes.status(), IsOk());
      // Same header (as JSON: the fixtures keep __metadata__ keys in
      // insertion order, we sort them), same padding rule, same data bytes.
      const std::string raw = testing::ReadRaw(path);
      uint64_t n0 = 0, n1 = 0;
      std::memcpy(&n0, raw.data(), 8);
      std::memcpy(&n1, bytes->data(), 8);
      EXPECT_EQ(n0 % 8, 0u);
      EXPECT_EQ(n0, n1);
      EXPECT_EQ(nlohmann::json::parse(raw.substr(8, n0)),
                nlohmann::json::parse(bytes->substr(8, n1)));
      EXPECT_TRUE(raw.substr(8 + n0) == bytes->substr(8 + n1))
          << "data region differs from " << path;
    }
    // Every case has the four core files.
    for (const char *name : {"model.safetensors", "inputs.safetensors",
                             "outputs.safetensors", "adamw_step.safetensors"}) {
      struct stat st;
      EXPECT_EQ(::stat((c + "/" + name).c_str(), &st), 0) << c << "/" << name;
    }
  }
  EXPECT_GT(files, 0);
}

// Known values of one case: block_tiny's inputs (fixtures README).
TEST(Safetensors, BlockTinyInputsHaveTheDocumentedShapes) {
  const std::string path = testing::FixturesDir() + "/block_tiny/inputs.safetensors";
  auto f = SafetensorsFile::Open(path);
  ASSERT_THAT(f.status(), IsOk());
  EXPECT_EQ(f->names(), std::vector<std::string>({"attention_mask",
                                                  "block_attention_mask",
                                                  "input_ids", "labels"}));
  EXPECT_EQ(f->Find("input_ids")->shape, std::vector<int64_t>({2, 6, 4}));
  EXPECT_EQ(f->Find("block_attention_mask")->shape, std::vector<int64_t>({2, 6}));
  EXPECT_EQ(f->Find("labels")->dtype, proto::I64);
}

} // namespace
} // namespace bt::rt
