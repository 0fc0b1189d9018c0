#include "sim/report/tree_picture.h"

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "core/tiers/memory_storage.h"

namespace kvsim::sim {
namespace {

// DOT record-label escaping (inside a quoted label).
std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\' || c == '{' || c == '}' || c == '|' || c == '<' || c == '>') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

std::string tokens_text(std::span<const Token> key, size_t shown) {
  std::ostringstream os;
  os << "[";
  const size_t n = key.size();
  const size_t head = n <= shown ? n : shown / 2;
  for (size_t i = 0; i < head; ++i)
    os << (i ? " " : "") << key[i];
  if (n > shown) {
    os << " … ";
    for (size_t i = n - (shown - head); i < n; ++i)
      os << key[i] << (i + 1 < n ? " " : "");
  }
  os << "] " << n << " tok";
  return os.str();
}

std::string value_text(const ComponentData& d) {
  std::string s =
      d.value ? (d.host_value ? "device+host" : "device") : (d.host_value ? "host" : "tombstone");
  if (d.lock_ref) s += " lock " + std::to_string(d.lock_ref);
  return s;
}

}  // namespace

std::string tree_dot(Executor& executor, const TreePictureOptions& options) {
  HiCache& cache = executor.cache();
  const RadixTree& tree = cache.tree();
  StorageBackend* storage = executor.storage();
  std::ostringstream os;
  os << "digraph kvsim_tree {\n"
     << "  graph [rankdir=TB, fontname=\"monospace\", label=\"" << esc(options.title)
     << "\", labelloc=t];\n"
     << "  node [shape=record, style=filled, fontname=\"monospace\", fontsize=10];\n";
  tree.for_each_node([&](const TreeNode& n) {
    const ComponentData& full = n.full();
    size_t stored = 0;
    if (storage != nullptr) {
      for (const PageDigest& d : n.hash_value)
        stored += storage->exists(d) ? 1 : 0;
    }
    std::string residency;
    std::string fill;
    if (n.is_root()) {
      residency = "root";
      fill = "white";
    } else if (full.value && full.host_value) {
      residency = "both";
      fill = "palegreen";
    } else if (full.value) {
      residency = "device";
      fill = "lightblue";
    } else if (full.host_value) {
      residency = "host";
      fill = "khaki";
    } else if (stored > 0) {
      residency = "storage";
      fill = "lightgray";
    } else {
      residency = "evicted";
      fill = "mistyrose";
    }
    std::string fields = "#" + std::to_string(n.id) + " ns " + std::to_string(n.ns);
    if (!n.is_root()) fields += "|" + esc(tokens_text(n.key, options.tokens_shown));
    std::string res = "residency: " + residency;
    if (stored > 0)
      res += ", storage " + std::to_string(stored) + "/" + std::to_string(n.hash_value.size()) +
             " pages";
    fields += "|" + esc(res);
    fields += "|" + esc("lock " + std::to_string(full.lock_ref) + ", host protect " +
                        std::to_string(full.host_lock_ref));
    std::string pending;
    if (n.write_through_pending)
      pending += "write (of #" + std::to_string(*n.write_through_pending) + ")";
    if (cache.load_pending(n.id)) pending += std::string(pending.empty() ? "" : ", ") + "load";
    if (cache.write_pending(n.id) && !n.write_through_pending) {
      pending += std::string(pending.empty() ? "" : ", ") + "write";
    }
    if (!pending.empty()) fields += "|" + esc("pending: " + pending);
    for (const auto& c : tree.components()) {
      if (c->type() == ComponentType::kFull || n.is_root()) continue;
      fields += "|" + esc(std::string(c->name()) + ": " + value_text(n.component(c->type())));
    }
    const bool hot = options.highlight && *options.highlight == n.id;
    os << "  n" << n.id << " [label=\"{" << fields << "}\", fillcolor=" << fill
       << (hot ? ", color=red, penwidth=3, fontcolor=red" : "") << "];\n";
  });
  tree.for_each_node([&](const TreeNode& n) {
    if (n.parent != nullptr) os << "  n" << n.parent->id << " -> n" << n.id << ";\n";
  });
  // Wide trees wrap: the children of a node with many children are staggered over three ranks
  // (what Graphviz's `unflatten -l 3` does for leaves), by invisible edges that ask for a longer
  // drop, so a fan of 15 leaves is about a third as wide.
  constexpr size_t kFanToStagger = 5;
  std::map<NodeId, std::vector<NodeId>> children;  // ordered: the same DOT for the same tree
  tree.for_each_node([&](const TreeNode& n) {
    if (n.parent != nullptr) children[n.parent->id].push_back(n.id);
  });
  for (const auto& [parent, kids] : children) {
    if (kids.size() < kFanToStagger) continue;
    // Leaves first in the cycle, then subtrees (each moves down with its whole subtree), so a
    // rank holds about a third of the fan either way.
    size_t k = 0;
    for (const bool leaves : {true, false}) {
      for (const NodeId c : kids) {
        if (children.count(c) == (leaves ? 1u : 0u)) continue;
        if (k % 3 != 0) {
          os << "  n" << parent << " -> n" << c << " [style=invis, minlen=" << 1 + k % 3 << "];\n";
        }
        ++k;
      }
    }
  }
  // The legend: what the fill colours and the highlighted box mean.
  os << "  legend [shape=plaintext, style=\"\", label=<<table border=\"0\" cellborder=\"1\" "
        "cellspacing=\"0\" cellpadding=\"3\"><tr><td colspan=\"2\"><b>full KV "
        "residency</b></td></tr>"
        "<tr><td bgcolor=\"lightblue\">device</td><td>on the GPU only</td></tr>"
        "<tr><td bgcolor=\"palegreen\">both</td><td>device and host</td></tr>"
        "<tr><td bgcolor=\"khaki\">host</td><td>host only (load back to use)</td></tr>"
        "<tr><td bgcolor=\"lightgray\">storage</td><td>evicted, pages in storage</td></tr>"
        "<tr><td bgcolor=\"mistyrose\">evicted</td><td>no KV left (tombstone)</td></tr>"
        "<tr><td><font color=\"red\">red box</font></td><td>the node the violation names</td>"
        "</tr><tr><td colspan=\"2\">lock: device lock_ref; host protect: host_lock_ref</td>"
        "</tr></table>>];\n";
  os << "}\n";
  return os.str();
}

std::optional<NodeId> violation_node(const SimViolation& violation) {
  static const std::regex kNode("node (\\d+)");
  std::smatch m;
  if (!std::regex_search(violation.detail, m, kNode)) return std::nullopt;
  return static_cast<NodeId>(std::stoull(m[1].str()));
}

bool dot_to_svg(const std::string& dot_text, const std::string& svg_path, std::string* error) {
  const std::string cmd = "dot -Tsvg -o '" + svg_path + "' 2>&1";
  if (svg_path.find('\'') != std::string::npos) {
    *error = "the SVG path has a quote in it";
    return false;
  }
  FILE* p = popen(cmd.c_str(), "w");
  if (p == nullptr) {
    *error = "cannot run Graphviz dot";
    return false;
  }
  std::fwrite(dot_text.data(), 1, dot_text.size(), p);
  const int status = pclose(p);
  if (status != 0) {
    *error = WIFEXITED(status) && WEXITSTATUS(status) == 127
                 ? "Graphviz dot is not installed (Debian: apt-get install graphviz)"
                 : "Graphviz dot failed";
    return false;
  }
  return true;
}

void TreeCapture::attach(Executor& executor) {
  executor_ = &executor;
  executor.set_observer(this);
}

void TreeCapture::before_op(size_t index, const Op& op) {
  if (next_ != nullptr) next_->before_op(index, op);
}

void TreeCapture::after_op(size_t index, const Op& op, const OpOutcome& outcome) {
  if (next_ != nullptr) next_->after_op(index, op, outcome);
  ops_seen_ = index + 1;
  // Pictures draw kvsim's core; another cache under test has no tree here to draw.
  if (executor_ == nullptr || executor_->core() == nullptr) return;
  if (at_ && *at_ == index) {
    // Ops are numbered from 1 wherever a person reads them: op N is the N-th op of the trace,
    // the one the run summary's "after op N" names.
    TreePictureOptions o{.title = title_ + " after op " + std::to_string(index + 1)};
    if (executor_->failed()) o.highlight = violation_node(*executor_->violation());
    at_dot_ = tree_dot(*executor_, o);
  }
  if (executor_->failed() && !failure_dot_) {
    const SimViolation& v = *executor_->violation();
    failure_dot_ = tree_dot(*executor_, {.title = title_ + " at its failure after op " +
                                                  std::to_string(index + 1) + ": " + v.invariant,
                                         .highlight = violation_node(v)});
  }
}

void TreeCapture::on_fault(std::string_view site) {
  if (next_ != nullptr) next_->on_fault(site);
}

void TreeCapture::on_executor_gone() {
  if (next_ != nullptr) next_->on_executor_gone();
  executor_ = nullptr;
}

}  // namespace kvsim::sim
