// check_property(): runs a RapidCheck property as the current GoogleTest test (plain, typed or
// value-parameterised — RC_GTEST_PROP covers only the first) and, on failure, prints
// RapidCheck's report (the shrunk counterexample: for a stateful property, the minimal command
// list, one exact call per line) followed by a replay line:
//
//   kvsim property: replay with RC_PARAMS="seed=<seed>" ./<binary> --gtest_filter=<test>
//
// The seed is RapidCheck's global one (printed at start-up as "Using configuration:
// seed=..."); re-running the one test with it regenerates the same cases, shrinks to the same
// counterexample and prints the same report. RapidCheck's own "reproduce=..." string (in the
// report) jumps straight to the minimal case instead.
#pragma once

#include <gtest/gtest.h>  // before rapidcheck (rapidcheck's extras use ::testing unguarded)

#include <rapidcheck.h>

#include <sstream>
#include <string>
#include <utility>

namespace kvsim::conformance {

inline std::string replay_line(const std::string& binary) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ostringstream os;
  os << "kvsim property: replay with RC_PARAMS=\"seed="
     << rc::detail::configuration().testParams.seed << "\" ./" << binary
     << " --gtest_filter=" << info->test_suite_name() << "." << info->name();
  return os.str();
}

template <typename Testable>
void check_property(const std::string& binary, Testable&& property) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata metadata;
  metadata.id = std::string(info->test_suite_name()) + "/" + info->name();
  metadata.description = info->name();
  const auto result = rc::detail::checkTestable(std::forward<Testable>(property), metadata);
  if (result.template is<rc::detail::SuccessResult>()) {
    if (!result.template get<rc::detail::SuccessResult>().distribution.empty()) {
      rc::detail::printResultMessage(result, std::cout);  // the RC_TAG / RC_CLASSIFY table
      std::cout << std::endl;
    }
    return;
  }
  std::ostringstream report;
  rc::detail::printResultMessage(result, report);
  const std::string replay = replay_line(binary);
  std::cout << replay << std::endl;  // also on stdout, next to RapidCheck's seed line
  FAIL() << report.str() << "\n" << replay;
}

}  // namespace kvsim::conformance
