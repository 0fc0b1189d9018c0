// Long file: one replay of a call trace from its header to its footer verdict (609 lines); the
// footer's verdicts (complete, cut by a signal, missing) are the next piece to move out.
#include "sim/trace/call_trace_replay.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include <sys/stat.h>

#include "core/common/assert.h"
#include "sim/base/hex64.h"
#include "sim/base/json_reader.h"
#include "sim/trace/call_trace_sidecar.h"
#include "sim/trace/call_trace_snapshot.h"

namespace kvsim::sim {
namespace {

uint64_t parse_hex(JsonReader& r, const std::string& key) {
  const std::string s = r.required_string(key);
  if (s.empty() || s.size() > 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
    r.fail(key, "expected up to 16 lowercase hex digits");
  }
  return std::stoull(s, nullptr, 16);
}

// The binary sidecar a recorder writes beside its trace: a plain file name in the trace's folder
// and a regular file. Anything else (a path, "-" for standard input, a FIFO, /dev/zero) could
// hang or read without end, so it is refused before it is opened.
std::string read_sidecar(JsonReader& r, const std::string& dir, const std::string& name) {
  if (name.empty() || name == "-" || name == "." || name == ".." ||
      name.find('/') != std::string::npos) {
    r.fail("blob", "'" + name + "' is not a file name beside the trace (the recorder writes one)");
  }
  struct stat st {};
  if (::stat((dir + name).c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    r.fail("blob", dir + name + " is not a regular file");
  }
  return read_text_file(dir + name);
}

// A lock or unlock that names what predates the segment (a trace with a snapshot): the lock of
// a snapshot node by id, the unlock of a lock taken before the segment by its record.
void parse_earlier_ref(JsonReader& r, Call& c, const CallTraceSnapshot* snap) {
  const std::string key = c.kind == CallKind::kLock ? "node" : "lock";
  if (snap == nullptr) r.fail(key, "names what precedes the trace, which needs a snapshot record");
  auto check_node = [&](NodeId id, const std::string& what) {
    if (id >= snap->tree.next_id) {
      r.fail(key, what + " " + std::to_string(id) +
                      " is not a node of the snapshot's time (next_id " +
                      std::to_string(snap->tree.next_id) + ")");
    }
  };
  if (c.kind == CallKind::kLock) {
    const auto id = static_cast<NodeId>(r.required_integer("node", 0, INT64_MAX));
    if (id != 0 && snap->node_lines.count(id) == 0) {
      r.fail("node", "node " + std::to_string(id) + " is not in the snapshot");
    }
    c.node = id;
    return;
  }
  JsonReader l = r.object("lock");
  c.earlier_call = l.required_integer("call", 0, INT64_MAX);
  if (static_cast<uint64_t>(c.earlier_call) >= snap->first_call) {
    l.fail("call", std::to_string(c.earlier_call) + " is not before the segment's first call " +
                       std::to_string(snap->first_call));
  }
  HeldLock h;
  h.anchor = static_cast<NodeId>(l.required_integer("anchor", 0, INT64_MAX));
  check_node(h.anchor, "anchor");
  if (l.has("start")) {
    h.start = static_cast<NodeId>(l.required_integer("start", 1, INT64_MAX));
    check_node(*h.start, "start");
  }
  l.finish();
  c.earlier = h;
}

Call parse_call(JsonReader& r, size_t index, CallOutcome* out, bool* has_out,
                const std::vector<Call>& calls, const std::string& blob, PageIds& pages,
                const CallTraceSnapshot* snap) {
  Call c;
  const std::string op = r.choice("op", "", {"match", "insert", "lock", "unlock", "evict"});
  *has_out = r.has("out");
  if (op == "match" || op == "insert") {
    c.kind = op == "match" ? CallKind::kMatch : CallKind::kInsert;
    c.ns = static_cast<Namespace>(r.integer("ns", 0, 0, INT64_MAX));
    c.tokens = tokens_of(r, calls, index, blob, pages);
    if (c.kind == CallKind::kInsert) {
      c.value = value_of(r, blob);
      c.value_from =
          static_cast<size_t>(r.integer("val_from", 0, 0, static_cast<int64_t>(c.tokens.size())));
    }
    if (*has_out) {
      JsonReader o = r.object("out");
      out->amount = o.required_integer(c.kind == CallKind::kMatch ? "hit" : "prefix", 0, INT64_MAX);
      out->node = static_cast<NodeId>(o.required_integer("node", 0, INT64_MAX));
      o.finish();
    }
  } else if (op == "lock" || op == "unlock") {
    c.kind = op == "lock" ? CallKind::kLock : CallKind::kUnlock;
    if (r.has(c.kind == CallKind::kLock ? "node" : "lock")) {
      parse_earlier_ref(r, c, snap);
    } else {
      c.ref = r.required_integer("of", 0, static_cast<int64_t>(index) - 1);
    }
    *has_out = false;
  } else {
    c.kind = CallKind::kEvict;
    c.n = r.required_integer("n", 0, INT64_MAX);
    if (*has_out) {
      JsonReader o = r.object("out");
      out->amount = o.required_integer("freed", 0, INT64_MAX);
      out->slots_hash = parse_hex(o, "slots");
      o.finish();
    }
  }
  r.finish();
  return c;
}

// The snapshot's node lines are over (`where`: the line after them): all announced, and it
// restores.
void finish_snapshot(const CallTraceSnapshot& snap, const std::string& where,
                     const std::string& source) {
  if (snap.tree.nodes.size() != snap.announced) {
    throw InputError(where + ": the snapshot announces " + std::to_string(snap.announced) +
                     " nodes, but " + std::to_string(snap.tree.nodes.size()) +
                     " node lines follow it");
  }
  check_snapshot(snap, source);
}

}  // namespace

CallTrace read_call_trace_text(const std::string& text, const std::string& source) {
  CallTrace t;
  std::string blob;
  PageIds pages;
  std::istringstream in(text);
  std::string line;
  size_t lineno = 0;
  bool header = false;
  bool snapshot_checked = false;  // the snapshot's node lines are all read, and it restores
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    const std::string where = source + ":" + std::to_string(lineno);
    if (t.end) throw InputError(where + ": a line after the footer");
    nlohmann::json j = parse_json(line, source, lineno);
    if (!j.is_object()) throw InputError(where + ": expected a JSON object");
    JsonReader r(j, where);
    if (!header) {
      if (r.required_integer("kvsim_trace", 1, 1) != 1)
        r.fail("kvsim_trace", "unsupported version");
      r.choice("kind", "", {"calls"});
      t.page_size = static_cast<int32_t>(r.required_integer("page_size", 1, INT32_MAX));
      pages.page_size = t.page_size;
      const std::string policy = r.choice("eviction_policy", "lru", {"lru", "lfu"});
      parse_eviction_policy(policy, &t.policy);
      t.source = r.string("source", "");
      t.slots_hash = static_cast<int>(r.integer("slots_hash", 1, 1, kSlotsHashLatest));
      if (r.has("blob")) {
        // The binary sidecar, next to the trace.
        const std::string name = r.required_string("blob");
        const size_t slash = source.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "" : source.substr(0, slash + 1);
        blob = read_sidecar(r, dir, name);
      }
      r.finish();
      header = true;
      continue;
    }
    if (j.contains("snapshot")) {
      if (t.snapshot || !t.calls.empty()) {
        throw InputError(where + ": a snapshot record comes right after the header, once");
      }
      t.snapshot = read_snapshot_record(j, where, lineno, t.page_size, t.policy);
      continue;
    }
    if (j.contains("node") && !j.contains("op")) {
      if (!t.snapshot || snapshot_checked) {
        throw InputError(where + ": a node line outside a snapshot (they follow its record)");
      }
      JsonReader n(j, where);
      read_snapshot_node(n, lineno, *t.snapshot, blob, pages);
      continue;
    }
    if (t.snapshot && !snapshot_checked) {
      finish_snapshot(*t.snapshot, where, source);
      snapshot_checked = true;
    }
    if (j.contains("end")) {
      JsonReader e = r.object("end");
      CallTraceEnd end;
      end.calls = static_cast<size_t>(e.required_integer("calls", 0, INT64_MAX));
      end.event_hash = parse_hex(e, "event_hash");
      end.cut_by_signal = static_cast<int>(e.integer("cut_by_signal", 0, 1, 64));
      if (end.cut_by_signal == 0) {  // a signal handler cannot read the tree's sizes
        end.nodes = static_cast<size_t>(e.required_integer("nodes", 0, INT64_MAX));
        end.evictable = e.required_integer("evictable", 0, INT64_MAX);
        end.protected_size = e.required_integer("protected", 0, INT64_MAX);
        end.truncated = e.boolean("truncated", false);
      }
      if (e.has("violation")) {
        JsonReader v = e.object("violation");
        end.violation =
            std::make_pair(static_cast<size_t>(v.required_integer("call", 0, INT64_MAX)),
                           v.required_string("detail"));
        v.finish();
      }
      e.finish();
      r.finish();
      t.end = end;
      continue;
    }
    CallOutcome out;
    bool has_out = false;
    t.calls.push_back(parse_call(r, t.calls.size(), &out, &has_out, t.calls, blob, pages,
                                 t.snapshot ? &*t.snapshot : nullptr));
    t.recorded.push_back(has_out ? std::optional<CallOutcome>(out) : std::nullopt);
  }
  if (!header) throw InputError(source + ": empty call trace (no header line)");
  // A recording ends with its footer, even one cut by SIGTERM or abort() (the handler writes
  // one): without it the file may have lost any number of calls at its end, and must never
  // replay as "matches the recording".
  if (!t.end) {
    throw InputError(source + ": incomplete recording: no footer after line " +
                     std::to_string(lineno) + " (" + std::to_string(t.calls.size()) +
                     " calls): the recording process was killed before writing one, or the "
                     "file was cut; only a whole recording replays");
  }
  // The footer counts the calls its recording wrote: a line lost or added between them is a
  // recording this file does not hold whole, never one that replays as "matches".
  if (t.end && t.end->calls != t.calls.size()) {
    throw InputError(source + ": footer: field calls: " + std::to_string(t.end->calls) +
                     " calls recorded, the file holds " + std::to_string(t.calls.size()));
  }
  if (t.snapshot && !snapshot_checked) {
    finish_snapshot(*t.snapshot, source + ":" + std::to_string(lineno + 1), source);
  }
  return t;
}

CallTrace read_call_trace(const std::string& path) {
  return read_call_trace_text(read_text_file(path), path);
}

bool is_call_trace(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return false;
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("kind") && j["kind"] == "calls";
}

CallReplay replay_calls(const CallTrace& trace, const std::vector<bool>* keep) {
  ScopedThrowingAsserts throwing;
  RadixTreeOptions options;
  options.page_size = trace.page_size;
  options.eviction_policy = trace.policy;
  RadixTree tree(options);
  if (trace.snapshot) {
    try {
      tree.restore(trace.snapshot->tree);
    } catch (const SnapshotError& e) {
      throw InputError(trace.source + ": snapshot: " + e.what());
    }
  }
  CallReplay r;
  const size_t n = trace.calls.size();
  r.was_applied.assign(n, false);
  r.outcomes.assign(n, std::nullopt);
  std::map<size_t, NodeId> node_of;
  std::map<size_t, LockRecord> lock_of;
  for (size_t i = 0; i < n; ++i) {
    if (keep != nullptr && !(*keep)[i]) continue;
    const Call& c = trace.calls[i];
    CallOutcome out;
    try {
      switch (c.kind) {
        case CallKind::kMatch: {
          MatchResult m = tree.match_prefix(c.ns, c.tokens);
          out.amount = m.device_hit_length();
          out.node = m.last_device_node->id;
          node_of[i] = out.node;
          break;
        }
        case CallKind::kInsert: {
          const size_t aligned = c.tokens.size() / static_cast<size_t>(trace.page_size) *
                                 static_cast<size_t>(trace.page_size);
          if (c.value_from + c.value.size() < aligned) {  // only a hand-edited trace gets here
            ++r.skipped;
            continue;
          }
          // A recording keeps the slots from the first one the tree read (val_from): a replay
          // that reads an earlier one has diverged from it.
          const RadixTree::InsertValueSource value_of_range = [&c](size_t b, size_t e) {
            KV_ASSERT(b >= c.value_from, "replay: the insert read slot " + std::to_string(b) +
                                             ", before the first one the recording kept (" +
                                             std::to_string(c.value_from) +
                                             "): the replay diverged");
            const auto first = c.value.begin() + static_cast<ptrdiff_t>(b - c.value_from);
            return IndexVector(Tier::kDevice, std::vector<SlotIndex>(
                                                  first, first + static_cast<ptrdiff_t>(e - b)));
          };
          InsertResult ir = tree.insert(c.ns, std::span<const Token>(c.tokens), value_of_range);
          out.amount = ir.prefix_len;
          out.node = ir.last_node != nullptr ? ir.last_node->id : tree.root()->id;
          node_of[i] = out.node;
          break;
        }
        case CallKind::kLock: {
          TreeNode* node = nullptr;
          if (c.node) {
            node = tree.find(*c.node);
          } else if (auto it = node_of.find(static_cast<size_t>(c.ref)); it != node_of.end()) {
            node = tree.find(it->second);
          }
          if (node == nullptr || node->evicted()) {
            ++r.skipped;
            continue;
          }
          lock_of[i] = tree.lock(*node);
          break;
        }
        case CallKind::kUnlock: {
          if (c.earlier) {
            LockRecord earlier;
            earlier.anchor = c.earlier->anchor;
            earlier.start[index_of(ComponentType::kFull)] = c.earlier->start;
            tree.unlock(earlier);
            break;
          }
          auto it = lock_of.find(static_cast<size_t>(c.ref));
          if (it == lock_of.end()) {
            ++r.skipped;
            continue;
          }
          tree.unlock(it->second);
          break;
        }
        case CallKind::kEvict: {
          EvictedLeaves e = evict_device_leaves(tree, c.n, false);
          out.amount = e.freed_tokens;
          out.slots_hash = hash_freed_slots(e, trace.slots_hash);
          break;
        }
      }
    } catch (const AssertionFailure& e) {
      r.was_applied[i] = true;
      r.violation = std::make_pair(i, std::string(e.what()));
      ++r.applied;
      break;
    }
    r.was_applied[i] = true;
    r.outcomes[i] = out;
    ++r.applied;
    r.event_hash = fold_call(r.event_hash, c.kind, out);
    if (keep == nullptr && !r.first_divergence && i < trace.recorded.size() && trace.recorded[i]) {
      const CallOutcome& rec = *trace.recorded[i];
      if (rec.amount != out.amount || rec.node != out.node || rec.slots_hash != out.slots_hash) {
        r.first_divergence = i;
        r.divergence = "call " + std::to_string(i) + " (" + std::string(to_string(c.kind)) +
                       "): recorded " + std::to_string(rec.amount) + "/node " +
                       std::to_string(rec.node) + ", replayed " + std::to_string(out.amount) +
                       "/node " + std::to_string(out.node);
      }
    }
  }
  if (!r.violation) {
    SanityReport report;
    try {
      tree.sanity_check(report);
    } catch (const AssertionFailure& e) {
      r.sanity.push_back(std::string("core.assert: ") + e.what());
    }
    for (const Violation& v : report.violations())
      r.sanity.push_back(v.invariant + ": " + v.detail);
  }
  r.nodes = tree.node_count();
  r.evictable = tree.evictable_size();
  r.protected_size = tree.protected_size();
  return r;
}

bool call_replay_matches(const CallTrace& t, const CallReplay& r) {
  if (r.first_divergence) return false;
  if (!t.end) return false;  // not a whole recording (read_call_trace refuses one)
  const bool same_violation =
      t.end->violation.has_value() == r.violation.has_value() &&
      (!r.violation || (r.violation->first == t.end->violation->first &&
                        failure_key(r.violation->second) == failure_key(t.end->violation->second)));
  if (t.end->cut_by_signal != 0) return same_violation && t.end->event_hash == r.event_hash;
  return same_violation && t.end->event_hash == r.event_hash && t.end->nodes == r.nodes &&
         t.end->evictable == r.evictable && t.end->protected_size == r.protected_size;
}

// The same failure for shrinking: the same assertion and message with numbers blanked (a
// message that names a node id names another id once earlier calls are dropped), and the
// asserting file named without its directories (a recording made in another checkout or
// build layout names the same file by another path).
std::string failure_key(const std::string& detail) {
  std::string_view rest(detail);
  const size_t colon = rest.find(':');  // "path/file.cpp:LINE: ..." names a location
  if (colon != std::string_view::npos && colon + 1 < rest.size() && rest[colon + 1] >= '0' &&
      rest[colon + 1] <= '9') {
    const size_t slash = rest.substr(0, colon).rfind('/');
    if (slash != std::string_view::npos) rest.remove_prefix(slash + 1);
  }
  std::string key;
  bool in_number = false;
  for (char ch : rest) {
    const bool digit = ch >= '0' && ch <= '9';
    if (digit && !in_number) key += '#';
    if (!digit) key += ch;
    in_number = digit;
  }
  return key;
}

CallShrinkResult shrink_calls(const CallTrace& trace, size_t max_replays) {
  CallShrinkResult out;
  out.original_calls = trace.calls.size();
  CallReplay first = replay_calls(trace);
  out.replays = 1;
  if (!first.violation) return out;
  const size_t fail_at = first.violation->first;
  const std::string detail = failure_key(first.violation->second);
  out.detail = first.violation->second;
  std::vector<size_t> kept;  // candidate calls before the failing one
  for (size_t i = 0; i < fail_at; ++i) {
    if (first.was_applied[i]) kept.push_back(i);
  }
  auto fails = [&](const std::vector<size_t>& cand) {
    std::vector<bool> keep(trace.calls.size(), false);
    for (size_t i : cand)
      keep[i] = true;
    keep[fail_at] = true;
    ++out.replays;
    CallReplay r = replay_calls(trace, &keep);
    return r.violation && failure_key(r.violation->second) == detail;
  };
  size_t chunks = 2;
  while (!kept.empty() && out.replays < max_replays) {
    const size_t size = std::max<size_t>(1, (kept.size() + chunks - 1) / chunks);
    bool progress = false;
    for (size_t start = 0; start < kept.size() && out.replays < max_replays;) {
      std::vector<size_t> cand(kept.begin(), kept.begin() + static_cast<ptrdiff_t>(start));
      cand.insert(cand.end(),
                  kept.begin() + static_cast<ptrdiff_t>(std::min(kept.size(), start + size)),
                  kept.end());
      if (fails(cand)) {
        kept = std::move(cand);
        progress = true;
      } else {
        start += size;
      }
    }
    if (!progress) {
      if (size == 1) break;
      chunks = std::min(kept.size(), chunks * 2);
    }
  }
  // Rebuild a self-contained trace: the kept calls, references renumbered.
  std::vector<bool> keep(trace.calls.size(), false);
  for (size_t i : kept)
    keep[i] = true;
  keep[fail_at] = true;
  CallReplay fin = replay_calls(trace, &keep);
  ++out.replays;
  std::map<size_t, size_t> renumber;
  CallTrace& t = out.trace;
  t.page_size = trace.page_size;
  t.policy = trace.policy;
  t.snapshot = trace.snapshot;  // kept whole: the calls are what shrinks
  t.source =
      "kvsim shrink of " + (trace.source.empty() ? std::string("a call trace") : trace.source);
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    if (!fin.was_applied[i]) continue;
    Call c = trace.calls[i];
    if ((c.kind == CallKind::kLock || c.kind == CallKind::kUnlock) && c.ref >= 0)
      c.ref = static_cast<int64_t>(renumber.at(static_cast<size_t>(c.ref)));
    renumber[i] = t.calls.size();
    t.calls.push_back(std::move(c));
    t.recorded.push_back(fin.outcomes[i]);
  }
  out.reproduced = fin.violation.has_value() && failure_key(fin.violation->second) == detail;
  if (out.reproduced) out.detail = fin.violation->second;
  return out;
}

void write_call_trace(const std::string& path, const CallTrace& t, const CallReplay& r) {
  std::ofstream f(path);
  if (!f) throw InputError(path + ": cannot write");
  f << call_trace_header(t.page_size, t.policy, t.source, t.slots_hash).dump() << '\n';
  if (t.snapshot) {
    for (const nlohmann::json& line : snapshot_to_json(*t.snapshot))
      f << line.dump() << '\n';
  }
  for (size_t i = 0; i < t.calls.size(); ++i) {
    const CallOutcome* out = i < r.outcomes.size() && r.outcomes[i] ? &*r.outcomes[i] : nullptr;
    f << call_to_json(t.calls[i], out).dump() << '\n';
  }
  CallTraceEnd end;
  end.calls = r.applied;
  end.event_hash = r.event_hash;
  end.nodes = r.nodes;
  end.evictable = r.evictable;
  end.protected_size = r.protected_size;
  end.violation = r.violation;
  f << call_trace_footer(end).dump() << '\n';
}

nlohmann::json call_replay_json(const CallTrace& t, const CallReplay& r) {
  nlohmann::json j{{"kind", "calls"},
                   {"calls", t.calls.size()},
                   {"applied", r.applied},
                   {"skipped", r.skipped},
                   {"event_hash", hex64(r.event_hash)},
                   {"nodes", r.nodes},
                   {"evictable", r.evictable},
                   {"protected", r.protected_size},
                   {"matches_recording", call_replay_matches(t, r)}};
  if (t.end) j["recorded_event_hash"] = hex64(t.end->event_hash);
  if (t.end && t.end->cut_by_signal != 0) j["cut_by_signal"] = t.end->cut_by_signal;
  if (t.snapshot) {
    j["snapshot"] = {{"nodes", t.snapshot->tree.nodes.size()},
                     {"locks", t.snapshot->locks.size()},
                     {"first_call", t.snapshot->first_call},
                     {"segment", t.snapshot->segment}};
    if (!t.snapshot->locks_disagree.empty())
      j["snapshot"]["locks_disagree"] = t.snapshot->locks_disagree;
  }
  if (r.violation) j["violation"] = {{"call", r.violation->first}, {"detail", r.violation->second}};
  if (r.first_divergence) j["divergence"] = r.divergence;
  if (!r.sanity.empty()) j["sanity"] = r.sanity;
  return j;
}

std::string call_replay_text(const std::string& path, const CallTrace& t, const CallReplay& r) {
  std::ostringstream s;
  s << path << ": call trace (" << (t.source.empty() ? "unknown source" : t.source)
    << "), page_size " << t.page_size << ", " << t.calls.size() << " calls: " << r.applied
    << " applied, " << r.skipped << " skipped\n";
  if (t.snapshot) {
    const CallTraceSnapshot& snap = *t.snapshot;
    s << "  segment " << snap.segment << " of a windowed recording: from call " << snap.first_call
      << ", restored its snapshot of " << snap.tree.nodes.size() << " nodes and "
      << snap.locks.size() << " held locks\n";
    if (!snap.locks_disagree.empty()) {
      s << "  note: at the snapshot the lock counts and the locks held disagreed ("
        << snap.locks_disagree << ")\n";
    }
  }
  s << "  event hash " << hex64(r.event_hash) << ", " << r.nodes << " nodes, evictable "
    << r.evictable << ", protected " << r.protected_size << "\n";
  if (r.violation)
    s << "  violation at call " << r.violation->first << ": core.assert: " << r.violation->second
      << "\n";
  for (const std::string& v : r.sanity)
    s << "  sanity: " << v << "\n";
  if (r.first_divergence) s << "  first divergence: " << r.divergence << "\n";
  if (t.end && t.end->truncated) s << "  the recording was truncated at its bound\n";
  if (t.end && t.end->cut_by_signal != 0) {
    s << "  the recording was cut by signal " << t.end->cut_by_signal << " after " << t.end->calls
      << " calls (its footer has no tree sizes to compare)\n";
  }
  s << "  replay " << (call_replay_matches(t, r) ? "matches" : "DIFFERS FROM")
    << " the recording\n";
  return s.str();
}

}  // namespace kvsim::sim

namespace kvsim::sim {

int call_replay_command(const std::string& path, bool json, bool expect_clean) {
  const CallTrace t = read_call_trace(path);
  const CallReplay r = replay_calls(t);
  if (json) {
    std::printf("%s\n", call_replay_json(t, r).dump().c_str());
  } else {
    std::printf("%s", call_replay_text(path, t, r).c_str());
  }
  // docs/cli.md's exit codes: 3 the replay differs from the recording, 1 it (still) fails.
  if (!call_replay_matches(t, r) && !expect_clean) return 3;
  return r.ok() ? 0 : 1;
}

int call_shrink_command(const std::string& path, const std::string& out, size_t max_replays,
                        bool json) {
  const CallTrace t = read_call_trace(path);
  const CallShrinkResult s = shrink_calls(t, max_replays);
  if (!s.reproduced) {
    std::fprintf(stderr, "kvsim: %s: the trace does not fail when replayed; nothing to shrink\n",
                 path.c_str());
    return 1;
  }
  const CallReplay r = replay_calls(s.trace);
  write_call_trace(out, s.trace, r);
  if (json) {
    std::printf("%s\n", nlohmann::json{{"original_calls", s.original_calls},
                                       {"shrunk_calls", s.trace.calls.size()},
                                       {"replays", s.replays},
                                       {"invariant", "core.assert"},
                                       {"detail", s.detail},
                                       {"out", out}}
                            .dump()
                            .c_str());
  } else {
    std::printf(
        "shrunk %zu calls to %zu in %zu replays; still fails with core.assert: %s\n"
        "written to %s (replay: kvsim replay %s)\n",
        s.original_calls, s.trace.calls.size(), s.replays, s.detail.c_str(), out.c_str(),
        out.c_str());
  }
  return 0;
}

}  // namespace kvsim::sim
