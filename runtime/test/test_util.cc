//===- test_util.cc - helpers for the runtime tests -----------------------===//

#include "test_util.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <ftw.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace bt::rt::testing {

std::string FixturesDir() {
  const char *env = std::getenv("BT_FIXTURES_DIR");
  if (env != nullptr && *env != '\0')
    return env;
  return BT_FIXTURES_DIR;
}

std::vector<std::string> FixtureCases() {
  const std::string dir = FixturesDir();
  std::vector<std::string> cases;
  DIR *d = ::opendir(dir.c_str());
  if (d == nullptr) {
    ADD_FAILURE() << "fixtures directory " << dir
                  << " is missing (set BT_FIXTURES_DIR)";
    return cases;
  }
  while (dirent *e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    std::string p = dir + "/" + name;
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      cases.push_back(p);
  }
  ::closedir(d);
  std::sort(cases.begin(), cases.end());
  if (cases.empty())
    ADD_FAILURE() << "fixtures directory " << dir << " has no case folders";
  return cases;
}

std::string BaseName(const std::string &path) {
  size_t s = path.rfind('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

TempDir::TempDir() {
  const char *t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/btrt-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    ADD_FAILURE() << "mkdtemp failed: " << std::strerror(errno);
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty())
    return;
  ::nftw(
      path_.c_str(),
      [](const char *p, const struct stat *, int, struct FTW *) {
        ::chmod(p, 0700);
        return ::remove(p);
      },
      16, FTW_DEPTH | FTW_PHYS);
}

void WriteRaw(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << "cannot write " << path;
}

std::string ReadRaw(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Tensor MakeF32(std::vector<int64_t> shape, const std::vector<float> &values) {
  auto t = Tensor::Allocate(proto::F32, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(static_cast<size_t>(t->num_elements()), values.size());
  std::copy(values.begin(), values.end(), t->data_as<float>());
  return std::move(t).value();
}

Tensor MakeI64(std::vector<int64_t> shape, const std::vector<int64_t> &values) {
  auto t = Tensor::Allocate(proto::I64, std::move(shape));
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(static_cast<size_t>(t->num_elements()), values.size());
  std::copy(values.begin(), values.end(), t->data_as<int64_t>());
  return std::move(t).value();
}

std::vector<float> F32Values(const Tensor &t) {
  EXPECT_EQ(t.dtype(), proto::F32);
  std::vector<float> v(static_cast<size_t>(t.num_elements()));
  if (!v.empty())
    std::memcpy(v.data(), t.data(), v.size() * sizeof(float));
  return v;
}

std::vector<int64_t> I64Values(const Tensor &t) {
  EXPECT_EQ(t.dtype(), proto::I64);
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  if (!v.empty())
    std::memcpy(v.data(), t.data(), v.size() * sizeof(int64_t));
  return v;
}

} // namespace bt::rt::testing
