#include "sim/model/op.h"

#include "sim/base/json_reader.h"
#include "sim/model/storage_faults.h"

namespace kvsim::sim {
namespace {

const std::vector<std::string> kOpNames = {
    "arrive",  "prefetch_check", "admit",    "compute", "finish",     "abort",
    "retract", "offload",        "resume",   "poll",    "step",       "storage",
    "tick",    "flush",          "liveness", "inject",  "start_loads"};

}  // namespace

std::string_view to_string(OpKind kind) {
  return kOpNames.at(static_cast<size_t>(kind));
}

nlohmann::json to_json(const Op& op) {
  nlohmann::json j = {{"op", to_string(op.kind)}};
  switch (op.kind) {
    case OpKind::kArrive:
      j["rid"] = op.rid;
      j["ns"] = op.ns;
      j["prompt"] = op.prompt.vec();
      j["output_len"] = op.output_len;
      break;
    case OpKind::kAdmit:
      j["rid"] = op.rid;
      j["load_back"] = op.flag;
      if (op.target == 1) j["defer_load"] = true;
      if (op.quota >= 0) j["load_back_quota"] = op.quota;
      break;
    case OpKind::kCompute:
      j["rid"] = op.rid;
      j["n"] = op.n;
      if (op.flag) j["oom"] = true;
      break;
    case OpKind::kPrefetchCheck:
    case OpKind::kFinish:
    case OpKind::kAbort:
    case OpKind::kRetract:
    case OpKind::kOffload:
    case OpKind::kResume:
      j["rid"] = op.rid;
      break;
    case OpKind::kStep:
      j["stream"] = op.target;
      j["n"] = op.n;
      break;
    case OpKind::kStorage:
      j["worker"] = op.target;
      if (op.n != 0) {
        j["fault"] = to_string(static_cast<StorageFault>(op.n & 0xff));
        if ((op.n >> kStorageFaultSkipShift) != 0) j["fault_skip"] = op.n >> kStorageFaultSkipShift;
      }
      break;
    case OpKind::kTick:
      j["now"] = op.n;
      break;
    case OpKind::kInject:
      j["fault"] = op.target;
      j["n"] = op.n;
      break;
    case OpKind::kPoll:
    case OpKind::kFlush:
    case OpKind::kLiveness:
    case OpKind::kStartLoads:
      break;
  }
  return j;
}

Op op_from_json(const nlohmann::json& doc, const std::string& where) {
  JsonReader r(doc, where);
  Op op;
  const std::string name = r.choice("op", "", kOpNames);
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == name) op.kind = static_cast<OpKind>(i);
  }
  constexpr int64_t kMax = INT64_MAX;
  switch (op.kind) {
    case OpKind::kArrive: {
      op.rid = static_cast<RequestId>(r.required_integer("rid", 1, kMax));
      op.ns = static_cast<Namespace>(r.integer("ns", 0, 0, kMax));
      {
        std::vector<Token> prompt;
        for (int64_t t : r.integer_array("prompt", 0, INT32_MAX))
          prompt.push_back(static_cast<Token>(t));
        op.prompt = Tokens(std::move(prompt));
      }
      if (op.prompt.empty()) r.fail("prompt", "is empty");
      op.output_len = r.required_integer("output_len", 1, 1 << 24);
      break;
    }
    case OpKind::kAdmit:
      op.rid = static_cast<RequestId>(r.required_integer("rid", 1, kMax));
      op.flag = r.boolean("load_back", true);
      op.target = r.boolean("defer_load", false) ? 1 : 0;
      op.quota = r.has("load_back_quota") ? r.integer("load_back_quota", 0, 0, kMax) : -1;
      break;
    case OpKind::kCompute:
      op.rid = static_cast<RequestId>(r.required_integer("rid", 1, kMax));
      op.n = r.required_integer("n", 1, int64_t{1} << 32);
      op.flag = r.boolean("oom", false);
      break;
    case OpKind::kPrefetchCheck:
    case OpKind::kFinish:
    case OpKind::kAbort:
    case OpKind::kRetract:
    case OpKind::kOffload:
    case OpKind::kResume:
      op.rid = static_cast<RequestId>(r.required_integer("rid", 1, kMax));
      break;
    case OpKind::kStep:
      op.target = static_cast<uint32_t>(r.required_integer("stream", 0, 1 << 16));
      op.n = r.required_integer("n", 1, int64_t{1} << 32);
      break;
    case OpKind::kStorage:
      op.target = static_cast<uint32_t>(r.required_integer("worker", 0, 2));
      if (r.has("fault")) {
        StorageFault f = StorageFault::kNone;
        const std::string fault = r.string("fault", "none");
        if (!parse_storage_fault(fault, &f))
          r.fail("fault", "\"" + fault + "\" is not a storage fault");
        op.n = static_cast<int64_t>(f) |
               (r.integer("fault_skip", 0, 0, 255) << kStorageFaultSkipShift);
      }
      break;
    case OpKind::kTick:
      op.n = r.required_integer("now", 0, kMax);
      break;
    case OpKind::kInject:
      op.target = static_cast<uint32_t>(r.required_integer("fault", 0, 2));
      op.n = r.required_integer("n", op.target == 2 ? 1 : 0, int64_t{1} << 30);
      break;
    case OpKind::kPoll:
    case OpKind::kFlush:
    case OpKind::kLiveness:
    case OpKind::kStartLoads:
      break;
  }
  r.finish();
  return op;
}

}  // namespace kvsim::sim
