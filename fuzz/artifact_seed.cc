//===- artifact_seed.cc - writes the artifact fuzzer's seed --------------===//
//
//   artifact_seed OUT_DIR
//
// Writes two small valid artifacts with ArtifactWriter (the compiler's
// writer), so the artifact fuzzer starts from the real layout without a
// compiled model (kilobytes, not the megabytes of a compiled fixture):
// OUT_DIR/seed.btart (kernels, four weights, a tokenizer, PTX, the emulator
// section, an entry point) and OUT_DIR/seed-exe (the same behind a 100-byte
// launcher prefix).
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/model/artifact.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

bt::rt::Tensor F32(std::vector<int64_t> shape, int n) {
  auto t = bt::rt::Tensor::Allocate(bt::proto::F32, shape);
  float *p = t->data_as<float>();
  for (int i = 0; i < n; ++i)
    p[i] = 0.25f * static_cast<float>(i) - 1.0f;
  return std::move(t).value();
}

int Fail(const absl::Status &s) {
  std::fprintf(stderr, "artifact_seed: %s\n", std::string(s.message()).c_str());
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: artifact_seed OUT_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  bt::proto::Manifest m;
  m.set_target("cpu");
  m.set_cpu("x86-64");
  m.set_producer("artifact_seed");
  m.mutable_config()->set_name("seed");
  bt::proto::EntryPoint *ep = m.add_entry_points();
  ep->set_name("eval");
  ep->set_symbol("bt_entry_eval");
  ep->add_params("w");
  bt::proto::TensorSpec *in = ep->add_inputs();
  in->set_name("input_ids");
  in->set_dtype(bt::proto::I64);
  in->add_shape(-1);
  in->add_shape(4);
  in->add_dim_names("B");
  in->add_dim_names("L");
  bt::proto::TensorSpec *out = ep->add_outputs();
  out->set_name("logits");
  out->set_dtype(bt::proto::F32);
  out->add_shape(-1);
  out->add_shape(8);
  bt::rt::ArtifactWriter w(m);
  const bt::rt::Tensor t1 = F32({3, 5}, 15), t2 = F32({}, 1), t3 = F32({7}, 7),
                       t4 = F32({0, 4}, 0);
  for (const auto &[name, t] : std::vector<std::pair<const char *, const bt::rt::Tensor *>>{
           {"w", &t1}, {"b", &t2}, {"v", &t3}, {"empty", &t4}})
    if (absl::Status s = w.AddWeight(name, *t); !s.ok())
      return Fail(s);
  w.SetKernels(std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(57, '\0'));
  w.SetTokenizer("{\"model\": {}}", bt::proto::TOKENIZER_HF_JSON);
  w.SetPtx(".version 8.0\n.target sm_80\n");
  w.SetCudaEmu(std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(25, '\0'));
  if (absl::Status s = w.Write(dir + "/seed.btart"); !s.ok())
    return Fail(s);
  const std::string launcher = dir + "/launcher.tmp";
  if (FILE *f = std::fopen(launcher.c_str(), "wb")) {
    std::fwrite("\x7f" "ELF", 1, 4, f);
    std::fwrite(std::string(96, 'L').data(), 1, 96, f);
    std::fclose(f);
  }
  w.SetPrefixFile(launcher);
  absl::Status s = w.Write(dir + "/seed-exe");
  std::remove(launcher.c_str());
  return s.ok() ? 0 : Fail(s);
}
