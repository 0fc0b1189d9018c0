// A call trace's header names its binary sidecar ("blob"). The name comes from a file a user may
// have been handed, so it must not reach standard input, a device or a FIFO: each of those could
// hang the replay or read without end (issue 29). Only a regular file beside the trace is read.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "sim/base/json_reader.h"
#include "sim/trace/call_trace_replay.h"

namespace kvsim::sim {
namespace {

std::string header_naming(const std::string& blob) {
  return R"({"kvsim_trace":1,"kind":"calls","page_size":1,"blob":")" + blob + "\"}\n";
}

std::string sidecar_error_of(const std::string& text, const std::string& source) {
  try {
    read_call_trace_text(text, source);
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

class SidecarDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/kvsim-sidecar-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    ::unlink((dir_ + "/pipe.bin").c_str());
    ::unlink((dir_ + "/t.jsonl.bin").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_;
};

TEST_F(SidecarDir, NamesThatAreNotAFileBesideTheTraceAreRefusedUnopened) {
  for (const std::string name : {"-", "/dev/zero", "../t.bin", ".", ".."}) {
    const std::string error = sidecar_error_of(header_naming(name), dir_ + "/t.jsonl");
    EXPECT_NE(error.find("field blob: '" + name + "' is not a file name beside the trace"),
              std::string::npos)
        << name << ": " << error;
  }
}

TEST_F(SidecarDir, AFifoNamedAsTheSidecarIsRefusedNotOpened) {
  ASSERT_EQ(::mkfifo((dir_ + "/pipe.bin").c_str(), 0600), 0);
  // Opening the FIFO for reading would block forever with no writer: the refusal must come first.
  const std::string error = sidecar_error_of(header_naming("pipe.bin"), dir_ + "/t.jsonl");
  EXPECT_NE(error.find("field blob: " + dir_ + "/pipe.bin is not a regular file"),
            std::string::npos)
      << error;
}

TEST_F(SidecarDir, ARegularSidecarBesideTheTraceIsRead) {
  std::ofstream(dir_ + "/t.jsonl.bin", std::ios::binary) << "";
  // Read and accepted as a sidecar: what fails next is the missing footer, not the blob.
  const std::string error = sidecar_error_of(header_naming("t.jsonl.bin"), dir_ + "/t.jsonl");
  EXPECT_EQ(error.find("blob"), std::string::npos) << error;
  EXPECT_NE(error.find("incomplete recording"), std::string::npos) << error;
}

}  // namespace
}  // namespace kvsim::sim
