// Integers the JSON readers cannot hold (issue 29): a JSON integer above 2^63-1 is an error
// naming its field, never clamped to 2^63-1 or wrapped; a Mooncake timestamp whose tick at the
// given ms per tick is beyond the simulator's last tick is an error naming its line, never
// tick 0 or 2^63.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "sim/base/json_reader.h"
#include "sim/workload/mooncake.h"

namespace kvsim::sim {
namespace {

std::string integer_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonIntegerBounds, AnIntegerAbove2To63IsAnErrorNamingItsField) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"seed": 18446744073709551615})");
  JsonReader r(doc, "s.json:1");
  EXPECT_EQ(integer_error_of([&] { r.integer("seed", 0, 0, INT64_MAX); }),
            "s.json:1: field seed: 18446744073709551615 is out of range [0, "
            "9223372036854775807]");
  const nlohmann::json top = nlohmann::json::parse(R"({"seed": 9223372036854775808})");
  JsonReader r2(top, "s.json:1");
  EXPECT_NE(
      integer_error_of([&] { r2.integer("seed", 0, 0, INT64_MAX); }).find("9223372036854775808"),
      std::string::npos);
  const nlohmann::json max = nlohmann::json::parse(R"({"seed": 9223372036854775807})");
  JsonReader r3(max, "s.json:1");
  EXPECT_EQ(r3.integer("seed", 0, 0, INT64_MAX), INT64_MAX);  // the largest that fits is read
}

TEST(JsonIntegerBounds, AnArrayElementAbove2To63IsAnErrorNamingItsIndex) {
  const nlohmann::json doc = nlohmann::json::parse(R"({"ids": [1, 18446744073709551615]})");
  JsonReader r(doc, "t.json:3");
  EXPECT_EQ(integer_error_of([&] { r.integer_array("ids", 0, INT64_MAX); }),
            "t.json:3: field ids[1]: 18446744073709551615 is out of range");
}

TEST(JsonIntegerBounds, AMooncakeTimestampBeyondTheLastTickNamesItsLine) {
  const std::string path = ::testing::TempDir() + "/mooncake_far.jsonl";
  {
    std::ofstream f(path);
    f << R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
      << "\n";
    f << R"({"timestamp": 9223372036854775807, "input_length": 1, "output_length": 1, )"
      << R"("hash_ids": [2]})"
      << "\n";
  }
  // 2^63 ms at 1 ms per tick is past 2^53 ticks; it used to become tick 2^63 (or 0 when cast).
  const std::string e = integer_error_of([&] { import_mooncake(path, 512, 1.0); });
  EXPECT_EQ(e.rfind(path + ":2: field timestamp: 9223372036854775807 ms at 1 ms per tick", 0), 0u)
      << e;
  // At a coarse enough tick the same line imports.
  EXPECT_EQ(import_mooncake(path, 512, 1e6).back().tick, 9223372036854u);
}

}  // namespace
}  // namespace kvsim::sim
