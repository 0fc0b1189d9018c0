// Op: one step of a simulator run, as the executor applies it to the real core. The scheduler
// decides ops; an op trace records them; replay and shrinking feed them back without the
// scheduler. An op that makes no sense in the current state (finishing a request that never
// arrived) is rejected with a reason: replaying a trace file makes that an error naming the
// line; delta debugging replays candidates leniently and writes out only ops that applied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/common/types.h"
#include "sim/workload/prompt.h"

namespace kvsim::sim {

// Do not renumber: op traces name kinds by string, but tests index by value.
enum class OpKind : uint8_t {
  kArrive = 0,         // a request enters the waiting queue (prefetch starts here)
  kPrefetchCheck = 1,  // admission gate: is the request's prefetch done?
  kAdmit = 2,          // match, lock, load back; the model reads the prefix (checked)
  kCompute = 3,        // allocate and forward up to `n` tokens (decode appends outputs)
  kFinish = 4,         // insert into the tree, free, unlock
  kAbort = 5,          // drop the request wherever it is
  kRetract = 6,        // decode out of memory: cache what is computed, back to waiting
  kOffload = 7,        // PD decode retract: copy KV + side buffers to CPU, free the slots
  kResume = 8,         // PD decode resume: new slots, copy back, check
  kPoll = 9,           // check_hicache_events (write/load acks, prefetch progress)
  kStep = 10,          // run up to `n` ops of backend stream `target`
  kStorage = 11,       // one unit of storage work: target 0 query, 1 io, 2 backup; n: the
                       // injected StorageFault (0 none; sim/model/storage_faults.h)
  kTick = 12,          // the logical clock moves to `n`
  kFlush = 13,         // wait for every device↔host transfer and consume its acks
  kLiveness = 14,      // end of a scheduler iteration: no live request older than liveness_ticks
  kInject = 15,        // arm a fault for the next op only: target 0 host pools full, 1 device
                       // pool full (but `n` pages), 2 the next `n` event queries answer "not yet"
  kStartLoads = 16,    // ready_to_load_host_cache: issue the load-backs admits queued (target
                       // 1), wait for them on compute; the model then reads those prefixes
};

struct Op {
  OpKind kind = OpKind::kPoll;
  RequestId rid = 0;
  Namespace ns = 0;        // kArrive
  Tokens prompt;           // kArrive (shared with the arrival it came from)
  int64_t output_len = 0;  // kArrive
  int64_t n = 0;           // kCompute: tokens computed after; kStep: ops; kTick: now
  uint32_t target = 0;     // kStep: stream; kStorage: which worker; kInject: what; kAdmit: 1
                           // queues the load-back for the next kStartLoads
  bool flag = false;       // kAdmit: allow load-back; kCompute: injected OOM
  int64_t quota = -1;      // kAdmit: the load-back's mem_quota in tokens (-1: none)
};

std::string_view to_string(OpKind kind);
nlohmann::json to_json(const Op& op);
// Throws InputError naming `where` (file:line) and the field.
Op op_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace kvsim::sim
