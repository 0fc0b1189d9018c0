// An executor holds one observer. A ChainedObserver stands in front of the one already set (a
// test's planted hook, a hunt setup's) and hands every call on to it after its own work, so
// several watchers share one executor: the hunt's rebuild check, a replay's pipe reporter, the
// crash recorder.
#pragma once

#include <cstddef>
#include <string_view>

#include "sim/model/executor.h"

namespace kvsim::sim {

class ChainedObserver : public ExecutorObserver {
 public:
  // Puts this observer in front of `executor`'s current one; call before its first op.
  void chain_onto(Executor& executor) {
    next_ = executor.observer();
    executor.set_observer(this);
  }

  // Overrides do their own work, then call these to hand the event on.
  void before_op(size_t index, const Op& op) override {
    if (next_ != nullptr) next_->before_op(index, op);
  }
  void after_op(size_t index, const Op& op, const OpOutcome& outcome) override {
    if (next_ != nullptr) next_->after_op(index, op, outcome);
  }
  void on_fault(std::string_view site) override {
    if (next_ != nullptr) next_->on_fault(site);
  }
  void on_executor_gone() override {
    if (next_ != nullptr) next_->on_executor_gone();
    next_ = nullptr;
  }

 private:
  ExecutorObserver* next_ = nullptr;
};

}  // namespace kvsim::sim
