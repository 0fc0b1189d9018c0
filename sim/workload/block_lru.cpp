#include "sim/workload/block_lru.h"

#include <list>
#include <map>

namespace kvsim::sim {

BlockLruResult block_lru_hit_rate(const std::vector<MooncakeRecord>& records,
                                  int64_t capacity_tokens, int64_t block_tokens) {
  const int64_t capacity_blocks = capacity_tokens <= 0 ? INT64_MAX : capacity_tokens / block_tokens;
  std::list<int64_t> order;  // front = least recently used
  std::map<int64_t, std::list<int64_t>::iterator> where;
  BlockLruResult r;
  int64_t blocks = 0;
  int64_t hit_blocks = 0;
  for (const MooncakeRecord& rec : records) {
    size_t hits = 0;
    while (hits < rec.hash_ids.size() && where.count(rec.hash_ids[hits]) != 0)
      ++hits;
    r.input_tokens += rec.input_length;
    r.hit_tokens += std::min<int64_t>(static_cast<int64_t>(hits) * block_tokens, rec.input_length);
    blocks += static_cast<int64_t>(rec.hash_ids.size());
    hit_blocks += static_cast<int64_t>(hits);
    for (int64_t id : rec.hash_ids) {  // insert (or refresh) every block, in order
      auto it = where.find(id);
      if (it != where.end()) order.erase(it->second);
      order.push_back(id);
      where[id] = std::prev(order.end());
      if (static_cast<int64_t>(order.size()) > capacity_blocks) {
        where.erase(order.front());
        order.pop_front();
      }
    }
  }
  r.token_hit_rate = static_cast<double>(r.hit_tokens) / static_cast<double>(r.input_tokens);
  r.block_hit_rate = static_cast<double>(hit_blocks) / static_cast<double>(blocks);
  return r;
}

}  // namespace kvsim::sim
