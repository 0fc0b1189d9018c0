// KV_ASSERT's handler: the throwing handler turns a failure into an exception naming the
// expression, file and message; the scope restores the previous handler.
#include "core/common/assert.h"

#include <gtest/gtest.h>

#include <string>

#include "core/common/sanity.h"

namespace kvsim {
namespace {

TEST(Assert, ThrowingHandlerNamesTheFailure) {
  ScopedThrowingAsserts asserts;
  try {
    KV_ASSERT(1 + 1 == 3, "arithmetic is broken");
    FAIL() << "KV_ASSERT did not fire";
  } catch (const AssertionFailure& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1 + 1 == 3"), std::string::npos);
    EXPECT_NE(what.find("arithmetic is broken"), std::string::npos);
    EXPECT_NE(what.find("assert_test.cpp"), std::string::npos);
  }
  KV_ASSERT(true, "never fires");
}

// Messages are recorded in traces and compared on replay, so the file is named from the source
// root however the compiler was handed it (absolute, or relative under ccache's base_dir).
TEST(Assert, NamesTheFileFromTheSourceRoot) {
  ScopedThrowingAsserts asserts;
  try {
    KV_ASSERT(false, "fires");
    FAIL() << "KV_ASSERT did not fire";
  } catch (const AssertionFailure& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tests/core/common/assert_test.cpp:", 0), 0u) << e.what();
  }
}

TEST(Assert, ScopeRestoresThePreviousHandler) {
  const AssertHandler before = set_assert_handler(nullptr);
  set_assert_handler(before);
  {
    ScopedThrowingAsserts asserts;
    EXPECT_EQ(set_assert_handler(&throwing_assert_handler), &throwing_assert_handler);
  }
  EXPECT_EQ(set_assert_handler(before), before);
}

TEST(SanityReport, KeepsOrderAndSummarisesTheFirstViolation) {
  SanityReport r;
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.summary(), "ok");
  r.add("tree.lock", "negative", NodeId{7});
  r.add("residency", "device-resident", std::nullopt, SlotIndex{12});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.has("residency"));
  EXPECT_FALSE(r.has("tree.shape"));
  EXPECT_EQ(r.summary(), "tree.lock: negative (node 7)");
}

}  // namespace
}  // namespace kvsim
