//===- file_util_test.cc - the one reader and the one atomic writer -------===//
//
// Regression tests for issue 14's data-loss and hang classes: outputs through
// symbolic links, to devices, FIFOs and directories, an output that names an
// input, and FIFOs given as inputs.
//
//===----------------------------------------------------------------------===//

#include "bt/runtime/base/file_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

namespace bt::rt {
namespace {

using testing::IsOk;
using testing::StatusIs;

bool IsSymlink(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

TEST(AtomicFileWriter, WritesThroughSymlinkToItsTarget) {
  testing::TempDir dir;
  testing::WriteRaw(dir.File("target"), "old");
  ASSERT_EQ(::symlink("target", dir.File("link").c_str()), 0);
  ASSERT_THAT(WriteFileAtomically(dir.File("link"), "new"), IsOk());
  EXPECT_TRUE(IsSymlink(dir.File("link")));
  EXPECT_EQ(testing::ReadRaw(dir.File("target")), "new");
}

TEST(AtomicFileWriter, FollowsChainOfSymlinksAcrossDirectories) {
  testing::TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("sub").c_str(), 0755), 0);
  testing::WriteRaw(dir.File("sub/target"), "old");
  ASSERT_EQ(::symlink("sub/target", dir.File("a").c_str()), 0);
  ASSERT_EQ(::symlink(dir.File("a").c_str(), dir.File("b").c_str()), 0);
  ASSERT_THAT(WriteFileAtomically(dir.File("b"), "new"), IsOk());
  EXPECT_TRUE(IsSymlink(dir.File("a")));
  EXPECT_TRUE(IsSymlink(dir.File("b")));
  EXPECT_EQ(testing::ReadRaw(dir.File("sub/target")), "new");
}

TEST(AtomicFileWriter, DanglingSymlinkCreatesItsTarget) {
  testing::TempDir dir;
  ASSERT_EQ(::symlink("made", dir.File("link").c_str()), 0);
  ASSERT_THAT(WriteFileAtomically(dir.File("link"), "x"), IsOk());
  EXPECT_TRUE(IsSymlink(dir.File("link")));
  EXPECT_EQ(testing::ReadRaw(dir.File("made")), "x");
}

TEST(AtomicFileWriter, SymlinkLoopIsAnError) {
  testing::TempDir dir;
  ASSERT_EQ(::symlink("b", dir.File("a").c_str()), 0);
  ASSERT_EQ(::symlink("a", dir.File("b").c_str()), 0);
  EXPECT_FALSE(WriteFileAtomically(dir.File("a"), "x").ok());
  EXPECT_TRUE(IsSymlink(dir.File("a")));
}

TEST(AtomicFileWriter, CharacterDeviceIsWrittenInPlace) {
  struct stat before;
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  ASSERT_TRUE(S_ISCHR(before.st_mode));
  ASSERT_THAT(WriteFileAtomically("/dev/null", "discarded"), IsOk());
  struct stat after;
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(before.st_ino, after.st_ino);
}

TEST(AtomicFileWriter, DirectoryIsRefused) {
  testing::TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("out").c_str(), 0755), 0);
  EXPECT_THAT(WriteFileAtomically(dir.File("out"), "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is a directory"));
  struct stat st;
  ASSERT_EQ(::stat(dir.File("out").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_THAT(CheckOutputPath(dir.File("out")),
              StatusIs(absl::StatusCode::kFailedPrecondition, ""));
  EXPECT_THAT(CheckOutputPath(dir.File("out") + "/"),
              StatusIs(absl::StatusCode::kInvalidArgument, ""));
}

TEST(AtomicFileWriter, OutputThatIsAMappedInputIsRefused) {
  testing::TempDir dir;
  testing::WriteRaw(dir.File("in"), "input bytes");
  ASSERT_EQ(::symlink("in", dir.File("alias").c_str()), 0);
  {
    absl::StatusOr<std::shared_ptr<MappedFile>> in = MappedFile::Open(dir.File("in"));
    ASSERT_THAT(in.status(), IsOk());
    EXPECT_THAT(WriteFileAtomically(dir.File("in"), "x"),
                StatusIs(absl::StatusCode::kFailedPrecondition, "an input"));
    // The same file under another name (a link) is the same input.
    EXPECT_THAT(WriteFileAtomically(dir.File("alias"), "x"),
                StatusIs(absl::StatusCode::kFailedPrecondition, "the input"));
    EXPECT_EQ(testing::ReadRaw(dir.File("in")), "input bytes");
  }
  // Once the input is closed the path is an ordinary output again.
  EXPECT_THAT(WriteFileAtomically(dir.File("in"), "x"), IsOk());
  EXPECT_EQ(testing::ReadRaw(dir.File("in")), "x");
}

TEST(AtomicFileWriter, FifoWithoutReaderIsAnErrorNotAHang) {
  testing::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.File("fifo").c_str(), 0644), 0);
  absl::Status s = WriteFileAtomically(dir.File("fifo"), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a FIFO"), absl::string_view::npos) << s;
  struct stat st;
  ASSERT_EQ(::stat(dir.File("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)); // not replaced by a regular file
}

TEST(OpenRegularFileForReading, FifoIsAnErrorNotAHang) {
  testing::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.File("fifo").c_str(), 0644), 0);
  EXPECT_THAT(ReadFile(dir.File("fifo")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is a FIFO"));
  EXPECT_THAT(MappedFile::Open(dir.File("fifo")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is a FIFO"));
}

TEST(OpenRegularFileForReading, DirectoryAndDeviceAreErrors) {
  testing::TempDir dir;
  EXPECT_THAT(ReadFile(dir.path()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "is a directory"));
  EXPECT_THAT(ReadFile("/dev/zero").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "character device"));
}

} // namespace
} // namespace bt::rt
