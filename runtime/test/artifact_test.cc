//===- artifact_test.cc ---------------------------------------------------===//

#include "bt/runtime/model/artifact.h"

#include <cstring>
#include <functional>
#include <sys/stat.h>

#include "bt/runtime/model/config.h"
#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;
using ::testing::HasSubstr;

proto::TensorSpec Spec(const std::string &name, DType dtype,
                       std::vector<int64_t> shape) {
  proto::TensorSpec s;
  s.set_name(name);
  s.set_dtype(dtype);
  for (int64_t d : shape)
    s.add_shape(d);
  return s;
}

proto::Manifest BaseManifest() {
  proto::Manifest m;
  m.set_target("cpu");
  m.set_cpu("x86-64");
  m.set_producer("artifact_test");
  auto c = LoadModelConfig(testing::FixtureCases().at(0));
  EXPECT_THAT(c.status(), IsOk());
  *m.mutable_config() = c.value_or(proto::ModelConfig());
  proto::EntryPoint *ep = m.add_entry_points();
  ep->set_name("eval");
  ep->set_symbol("bt_entry_eval");
  ep->add_params("w");
  ep->add_params("b");
  *ep->add_inputs() = Spec("input_ids", proto::I64, {-1, -1, 4});
  *ep->add_outputs() = Spec("logits", proto::F32, {-1, -1, 4, 512});
  return m;
}

struct Contents {
  Tensor w = testing::MakeF32({3, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  Tensor b = testing::MakeF32({}, {-2.5f});
  Tensor ids = testing::MakeI64({3}, {7, 8, 9});
  Tensor empty = testing::MakeF32({0, 4}, {});
  std::string kernels = std::string("\x7f" "ELF", 4) + std::string(5000, 'k');
  std::string tokenizer = "{\"model\": \"a tokenizer.json\"}";
};

void AddAll(ArtifactWriter &w, const Contents &c) {
  ASSERT_THAT(w.AddWeight("w", c.w), IsOk());
  ASSERT_THAT(w.AddWeight("b", c.b), IsOk());
  ASSERT_THAT(w.AddWeight("ids", c.ids), IsOk());
  ASSERT_THAT(w.AddWeight("empty", c.empty), IsOk());
  w.SetKernels(c.kernels);
  w.SetTokenizer(c.tokenizer, proto::TOKENIZER_HF_JSON);
}

void ExpectContents(const Artifact &a, const Contents &c) {
  EXPECT_EQ(a.manifest().format_version(), 1u);
  EXPECT_EQ(a.manifest().target(), "cpu");
  EXPECT_EQ(a.manifest().producer(), "artifact_test");
  EXPECT_EQ(a.manifest().config().name(), BaseManifest().config().name());
  EXPECT_EQ(a.kernels(), c.kernels);
  EXPECT_EQ(a.tokenizer(), c.tokenizer);
  EXPECT_EQ(a.manifest().tokenizer_kind(), proto::TOKENIZER_HF_JSON);
  ASSERT_NE(a.FindEntryPoint("eval"), nullptr);
  EXPECT_EQ(a.FindEntryPoint("nope"), nullptr);
  EXPECT_EQ(a.manifest().weights_data().offset() % 4096, 0u);
  EXPECT_EQ((a.payload_start() + a.manifest().weights_data().offset()) % 4096, 0u);
  for (const auto &[name, t] :
       std::vector<std::pair<std::string, const Tensor *>>{
           {"w", &c.w}, {"b", &c.b}, {"ids", &c.ids}, {"empty", &c.empty}}) {
    SCOPED_TRACE(name);
    auto g = a.GetWeight(name);
    ASSERT_THAT(g.status(), IsOk());
    EXPECT_EQ(g->dtype(), t->dtype());
    EXPECT_EQ(g->shape(), t->shape());
    EXPECT_EQ(g->bytes(), t->bytes());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(g->data()) % 64, 0u);
    EXPECT_EQ(a.FindWeight(name)->offset() % 64, 0u);
  }
  EXPECT_THAT(a.GetWeight("zzz").status(),
              StatusIs(absl::StatusCode::kNotFound, "no weight 'zzz'"));
}

TEST(Artifact, RoundTrip) {
  testing::TempDir dir;
  Contents c;
  ArtifactWriter w(BaseManifest());
  AddAll(w, c);
  const std::string path = dir.File("model.btart");
  ASSERT_THAT(w.Write(path), IsOk());
  auto a = Artifact::Open(path);
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_EQ((*a)->payload_start(), 0u);
  ExpectContents(**a, c);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  // Trailer at the very end.
  const std::string raw = testing::ReadRaw(path);
  EXPECT_EQ(raw.substr(raw.size() - 32, 8), "BTARTIF1");
}

// An artifact built in memory (ArtifactWriter::Serialize, Artifact::FromBytes:
// the in-process path of bt-run) holds the same bytes as the file Write
// stores and reads back the same; bad bytes get Open's errors under the
// given name.
TEST(Artifact, InMemoryMatchesTheFile) {
  testing::TempDir dir;
  Contents c;
  ArtifactWriter w(BaseManifest());
  AddAll(w, c);
  absl::StatusOr<std::string> bytes = w.Serialize();
  ASSERT_THAT(bytes.status(), IsOk());
  const std::string path = dir.File("model.btart");
  ASSERT_THAT(w.Write(path), IsOk());
  EXPECT_EQ(*bytes, testing::ReadRaw(path));
  auto a = Artifact::FromBytes("<in memory>", *bytes);
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_EQ((*a)->path(), "<in memory>");
  EXPECT_EQ((*a)->payload_start(), 0u);
  ExpectContents(**a, c);
  std::string bad = *bytes;
  bad[bad.size() - 32] = 'X';
  EXPECT_THAT(Artifact::FromBytes("<in memory>", bad).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "<in memory>: no bt artifact"));
  EXPECT_THAT(Artifact::FromBytes("<empty>", "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "<empty>: no bt artifact"));
  // An executable (prefix file) is written with Write only.
  w.SetPrefixFile(path);
  EXPECT_THAT(w.Serialize().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "prefix file"));
}

TEST(Artifact, ExecutableWithPrefix) {
  testing::TempDir dir;
  std::string prefix(5000, '\0');
  for (size_t i = 0; i < prefix.size(); ++i)
    prefix[i] = static_cast<char>(i * 7);
  testing::WriteRaw(dir.File("launcher"), prefix);
  Contents c;
  ArtifactWriter w(BaseManifest());
  AddAll(w, c);
  w.SetPrefixFile(dir.File("launcher"));
  const std::string path = dir.File("model");
  ASSERT_THAT(w.Write(path), IsOk());
  auto a = Artifact::Open(path);
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_EQ((*a)->payload_start(), 8192u);
  ExpectContents(**a, c);
  EXPECT_EQ(testing::ReadRaw(path).substr(0, prefix.size()), prefix);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
}

TEST(Artifact, EmptyArtifact) {
  testing::TempDir dir;
  proto::Manifest m;
  m.set_target("cpu");
  ArtifactWriter w(m);
  ASSERT_THAT(w.Write(dir.File("e")), IsOk());
  auto a = Artifact::Open(dir.File("e"));
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_TRUE((*a)->kernels().empty());
  EXPECT_EQ((*a)->manifest().weights_size(), 0);
}

TEST(Artifact, WriterErrors) {
  testing::TempDir dir;
  Contents c;
  ArtifactWriter w(BaseManifest());
  ASSERT_THAT(w.AddWeight("w", c.w), IsOk());
  EXPECT_THAT(w.AddWeight("w", c.b),
              StatusIs(absl::StatusCode::kInvalidArgument, "duplicate weight 'w'"));
  EXPECT_THAT(w.AddWeight("", c.b), StatusIs(absl::StatusCode::kInvalidArgument, "empty name"));
  Tensor none;
  EXPECT_THAT(w.AddWeight("n", none), StatusIs(absl::StatusCode::kInvalidArgument, "'n'"));
  EXPECT_THAT(w.Write(dir.File("no/such/dir/x")),
              StatusIs(absl::StatusCode::kNotFound, "no/such/dir/x"));
  w.SetPrefixFile(dir.File("missing-launcher"));
  EXPECT_THAT(w.Write(dir.File("x")),
              StatusIs(absl::StatusCode::kNotFound, "missing-launcher"));
  struct stat st;
  EXPECT_NE(::stat(dir.File("x").c_str(), &st), 0);
}

//===----------------------------------------------------------------------===//
// Corruptions.
//===----------------------------------------------------------------------===//

void PutLE64(std::string &s, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A hand-made artifact: payload bytes (from offset 0) + serialized manifest
// appended at `manifest_offset` + trailer; for manifests the writer would
// never produce.
std::string RawArtifact(const proto::Manifest &m, std::string payload,
                        uint64_t payload_start = 0) {
  std::string mb;
  EXPECT_TRUE(m.SerializeToString(&mb));
  std::string out(payload_start, 'P');
  const uint64_t moff = payload.size();
  out += payload + mb;
  std::string trailer = "BTARTIF1" + std::string(24, '\0');
  PutLE64(trailer, 8, payload_start);
  PutLE64(trailer, 16, moff);
  PutLE64(trailer, 24, mb.size());
  return out + trailer;
}

// A valid laid-out manifest for Contents, and its payload bytes.
std::pair<proto::Manifest, std::string> ValidLayout() {
  Contents c;
  ArtifactWriter w(BaseManifest());
  AddAll(w, c);
  proto::Manifest m = w.LaidOutManifest();
  std::string payload(m.tokenizer().offset() + m.tokenizer().size(), '\0');
  return {m, payload};
}

struct Corruption {
  const char *name;
  std::function<std::string()> bytes;
  absl::StatusCode code;
  const char *message;
};

TEST(Artifact, RejectsEveryCorruption) {
  testing::TempDir dir;
  Contents c;
  ArtifactWriter w(BaseManifest());
  AddAll(w, c);
  ASSERT_THAT(w.Write(dir.File("good")), IsOk());
  const std::string good = testing::ReadRaw(dir.File("good"));
  const size_t t = good.size() - 32;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;

  auto layout = [](std::function<void(proto::Manifest &)> edit) {
    return [edit]() {
      auto [m, payload] = ValidLayout();
      edit(m);
      return RawArtifact(m, payload);
    };
  };
  const std::vector<Corruption> cases = {
      {"empty", [] { return std::string(); }, kInvalid, "shorter than the 32-byte trailer"},
      {"short", [&] { return good.substr(good.size() - 20); }, kInvalid,
       "shorter than the 32-byte trailer"},
      {"truncated", [&] { return good.substr(0, good.size() - 1); }, kInvalid,
       "magic \"BTARTIF1\""},
      {"bad_magic", [&] { std::string s = good; s[t + 7] = '2'; return s; }, kInvalid,
       "no bt artifact"},
      {"plain_file", [] { return std::string(100, 'x'); }, kInvalid, "no bt artifact"},
      {"payload_unaligned", [&] { std::string s = good; PutLE64(s, t + 8, 100); return s; },
       kInvalid, "payload_start 100 is not a multiple of 4096"},
      {"payload_past_eof", [&] { std::string s = good; PutLE64(s, t + 8, 1 << 30); return s; },
       kInvalid, "payload_start 1073741824 is past the trailer"},
      {"manifest_past_eof", [&] { std::string s = good; PutLE64(s, t + 16, t); return s; },
       kInvalid, "manifest ["},
      {"manifest_size_overflow",
       [&] { std::string s = good; PutLE64(s, t + 24, ~0ULL); return s; }, kInvalid,
       "runs past the payload"},
      {"manifest_garbage",
       [&] {
         std::string s = good;
         uint64_t off = 0, size = 0;
         std::memcpy(&off, s.data() + t + 16, 8);
         std::memcpy(&size, s.data() + t + 24, 8);
         for (uint64_t i = 0; i < size; ++i)
           s[off + i] = '\x0f'; // wire type 7: invalid
         return s;
       },
       kInvalid, "the manifest does not parse"},
      {"format_version", layout([](proto::Manifest &m) { m.set_format_version(2); }),
       absl::StatusCode::kFailedPrecondition, "unknown artifact format_version 2"},
      {"format_version_zero", layout([](proto::Manifest &m) { m.set_format_version(0); }),
       absl::StatusCode::kFailedPrecondition, "unknown artifact format_version 0"},
      {"section_past_payload",
       layout([](proto::Manifest &m) { m.mutable_tokenizer()->set_size(1 << 20); }), kInvalid,
       "tokenizer section"},
      {"sections_overlap",
       layout([](proto::Manifest &m) { m.mutable_kernels()->set_size(8193); }), kInvalid,
       "the kernels [0, 8193) and weights_data [8192, "},
      {"weights_unaligned_section",
       layout([](proto::Manifest &m) { m.mutable_weights_data()->set_offset(4097); }), kInvalid,
       "weights_data section offset 4097 is not a multiple of 4096"},
      {"weight_past_section",
       layout([](proto::Manifest &m) { m.mutable_weights(0)->set_offset(1 << 16); }), kInvalid,
       "weight 'w' [65536, +60) runs past the weights section"},
      {"weight_unaligned",
       layout([](proto::Manifest &m) { m.mutable_weights(1)->set_offset(4); }), kInvalid,
       "weight 'b' offset 4 is not 64-byte aligned"},
      {"weights_overlap",
       layout([](proto::Manifest &m) { m.mutable_weights(1)->set_offset(0); }), kInvalid,
       "weight 'w' [0, 60) and weight 'b' [0, 4) overlap"},
      {"weight_nbytes",
       layout([](proto::Manifest &m) { m.mutable_weights(0)->set_nbytes(56); }), kInvalid,
       "weight 'w' has nbytes 56, but F32[3, 5] needs 60"},
      {"weight_dtype",
       layout([](proto::Manifest &m) { m.mutable_weights(0)->set_dtype(proto::DTYPE_UNSPECIFIED); }),
       kInvalid, "weight 'w' has unsupported dtype UNSPECIFIED"},
      {"weight_negative_dim",
       layout([](proto::Manifest &m) { m.mutable_weights(0)->set_shape(0, -3); }), kInvalid,
       "weight 'w': negative dimension"},
      {"weight_duplicate",
       layout([](proto::Manifest &m) { m.mutable_weights(1)->set_name("w"); }), kInvalid,
       "weight 'w' appears twice"},
      {"entry_unknown_param",
       layout([](proto::Manifest &m) { m.mutable_entry_points(0)->add_params("ghost"); }),
       kInvalid, "entry point 'eval' takes param 'ghost', which is not a weight"},
      {"entry_no_symbol",
       layout([](proto::Manifest &m) { m.mutable_entry_points(0)->clear_symbol(); }), kInvalid,
       "entry point 'eval' has no symbol"},
      {"entry_duplicate",
       layout([](proto::Manifest &m) { *m.add_entry_points() = m.entry_points(0); }), kInvalid,
       "entry point 'eval' appears twice"},
      {"entry_bad_dim",
       layout([](proto::Manifest &m) {
         m.mutable_entry_points(0)->mutable_inputs(0)->set_shape(0, -2);
       }),
       kInvalid, "entry point 'eval' input 'input_ids' has dim -2"},
      {"entry_dim_names_count",
       layout([](proto::Manifest &m) {
         m.mutable_entry_points(0)->mutable_inputs(0)->add_dim_names("B");
       }),
       kInvalid, "entry point 'eval' input 'input_ids' has 1 dim_names for rank 3"},
      {"entry_bad_output_dtype",
       layout([](proto::Manifest &m) {
         m.mutable_entry_points(0)->mutable_outputs(0)->set_dtype(proto::DTYPE_UNSPECIFIED);
       }),
       kInvalid, "entry point 'eval' output 'logits' has unsupported dtype"},
  };
  for (const Corruption &k : cases) {
    SCOPED_TRACE(k.name);
    const std::string path = dir.File(k.name);
    testing::WriteRaw(path, k.bytes());
    auto a = Artifact::Open(path);
    ASSERT_FALSE(a.ok());
    EXPECT_THAT(a.status(), StatusIs(k.code, k.message));
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(path));
  }
  // The valid hand-made layout itself opens (the corruptions above are the
  // only defects).
  auto [m, payload] = ValidLayout();
  testing::WriteRaw(dir.File("raw-good"), RawArtifact(m, payload));
  EXPECT_THAT(Artifact::Open(dir.File("raw-good")).status(), IsOk());
  EXPECT_THAT(Artifact::Open(dir.File("does-not-exist")).status(),
              StatusIs(absl::StatusCode::kNotFound, "does-not-exist"));
}

} // namespace
} // namespace bt::rt
