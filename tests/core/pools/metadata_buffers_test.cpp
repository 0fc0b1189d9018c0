// MetadataBuffers: PD per-request metadata slots; get_buf copies, free clears, checks report.
#include "core/pools/metadata_buffers.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/common/assert.h"
#include "core/common/sanity.h"

namespace kvsim {

// Reaches into the state to corrupt it, so sanity_check's reports can be exercised.
struct MetadataBuffersTestPeer {
  static std::vector<MetadataSlot>& free_slots(MetadataBuffers& m) { return m.free_slots_; }
  static MetadataRecord& row(MetadataBuffers& m, MetadataSlot slot) {
    return *m.rows_[static_cast<size_t>(slot)];
  }
};

namespace {

constexpr MetadataBuffersOptions kOptions{
    .slot_count = 3, .top_k_capacity = 4, .hidden_state_bytes = 16, .sparse_top_k_capacity = 6};

// A record whose every field depends on `request`.
MetadataRecord record_for(int32_t request) {
  MetadataRecord r;
  r.first_output_token = 1000 + request;
  r.cached_tokens = {.total = 100 + request,
                     .device = 60 + request,
                     .host = 30,
                     .storage = 10,
                     .multimodal = {request, 2, 3}};
  r.output_logprob = -0.25 * request;
  r.top_k_ids = {request, request + 1, request + 2};
  r.hidden_state.assign(16, static_cast<std::byte>(request));
  r.sparse_top_k = {7 * request, 7 * request + 1, 7 * request + 5, 7 * request + 9};
  r.bootstrap_room = 0xB00700000000ull + static_cast<uint64_t>(request);
  return r;
}

// Goal: slots are handed out until none is left, and the most recently freed comes back first.
TEST(MetadataBuffers, AllocUntilFullThenLifoReuse) {
  MetadataBuffers m(kOptions);
  EXPECT_EQ(m.alloc(), 0);
  EXPECT_EQ(m.alloc(), 1);
  EXPECT_EQ(m.alloc(), 2);
  EXPECT_EQ(m.alloc(), std::nullopt);
  EXPECT_EQ(m.available_size(), 0);
  m.free(0);
  m.free(2);
  EXPECT_EQ(m.available_size(), 2);
  EXPECT_FALSE(m.is_allocated(2));
  EXPECT_EQ(m.alloc(), 2);
  EXPECT_EQ(m.alloc(), 0);
  SanityReport report;
  m.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

// Goal: every field set by prefill comes back exactly, per slot, without crosstalk.
TEST(MetadataBuffers, SetThenGetRoundTripsEveryField) {
  MetadataBuffers m(kOptions);
  const MetadataSlot a = *m.alloc();
  const MetadataSlot b = *m.alloc();
  m.set_buf(a, record_for(1));
  m.set_buf(b, record_for(2));
  EXPECT_EQ(*m.get_buf(a), record_for(1));
  EXPECT_EQ(*m.get_buf(b), record_for(2));
  MetadataRecord no_room = record_for(3);
  no_room.bootstrap_room.reset();
  no_room.top_k_ids = {9};  // shorter than the previous owner's: no stale tail
  no_room.sparse_top_k.clear();
  m.set_buf(a, no_room);
  EXPECT_EQ(*m.get_buf(a), no_room);
  EXPECT_EQ(*m.get_buf(b), record_for(2));
}

// Goal (seed 003): a retracted request's get_buf result is its own. After its slot is freed,
// handed to another request and overwritten, the earlier result still holds the first
// request's data — and a fresh get_buf shows the new owner's.
TEST(MetadataBuffers, GetBufCopySurvivesFreeReuseAndOverwrite) {
  MetadataBuffers m(kOptions);
  const MetadataSlot slot = *m.alloc();
  m.set_buf(slot, record_for(1));
  const MetadataSnapshot retracted = m.get_buf(slot);
  m.free(slot);
  EXPECT_EQ(*retracted, record_for(1));  // free cleared the row, not the snapshot
  const MetadataSlot reused = *m.alloc();
  ASSERT_EQ(reused, slot);
  m.set_buf(reused, record_for(2));
  EXPECT_EQ(*retracted, record_for(1));
  EXPECT_EQ(*m.get_buf(reused), record_for(2));
  // Two reads of one slot are two snapshots, not one shared row.
  EXPECT_NE(m.get_buf(reused).get(), m.get_buf(reused).get());
}

// Goal (#27374): free clears every field, bootstrap_room included, so the next owner of the
// slot starts from an empty record even if prefill never writes some field.
TEST(MetadataBuffers, FreeClearsEveryFieldIncludingBootstrapRoom) {
  MetadataBuffers m(kOptions);
  const MetadataSlot slot = *m.alloc();
  m.set_buf(slot, record_for(5));
  m.free(slot);
  SanityReport report;
  m.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
  ASSERT_EQ(m.alloc(), slot);
  const MetadataRecord fresh = *m.get_buf(slot);
  EXPECT_EQ(fresh.bootstrap_room, std::nullopt);
  EXPECT_EQ(fresh.first_output_token, 0);
  EXPECT_EQ(fresh.cached_tokens, CachedTokenCounts{});
  EXPECT_EQ(fresh.output_logprob, 0.0);
  EXPECT_TRUE(fresh.top_k_ids.empty());
  EXPECT_TRUE(fresh.sparse_top_k.empty());
  EXPECT_EQ(fresh.hidden_state, std::vector<std::byte>(16, std::byte{0}));
  // A record with a room of 0 is distinct from "no room".
  MetadataRecord zero_room;
  zero_room.hidden_state.assign(16, std::byte{0});
  zero_room.bootstrap_room = 0;
  m.set_buf(slot, zero_room);
  EXPECT_EQ(m.get_buf(slot)->bootstrap_room, std::optional<uint64_t>(0));
}

// Goal: lifecycle and shape misuse are programmer errors and change nothing.
TEST(MetadataBuffers, ProgrammerErrorsAreCaught) {
  ScopedThrowingAsserts asserts;
  MetadataBuffers m(kOptions);
  const MetadataSlot slot = *m.alloc();
  m.set_buf(slot, record_for(1));
  EXPECT_THROW(m.free(1), AssertionFailure);  // never allocated
  EXPECT_THROW(m.free(3), AssertionFailure);  // out of range
  EXPECT_THROW(m.free(-1), AssertionFailure);
  EXPECT_THROW(m.get_buf(1), AssertionFailure);
  EXPECT_THROW(m.set_buf(2, record_for(2)), AssertionFailure);
  MetadataRecord too_many = record_for(2);
  too_many.top_k_ids.assign(5, 1);
  EXPECT_THROW(m.set_buf(slot, too_many), AssertionFailure);
  MetadataRecord sparse_too_many = record_for(2);
  sparse_too_many.sparse_top_k.assign(7, 1);
  EXPECT_THROW(m.set_buf(slot, sparse_too_many), AssertionFailure);
  MetadataRecord wrong_hidden = record_for(2);
  wrong_hidden.hidden_state.resize(8);
  EXPECT_THROW(m.set_buf(slot, wrong_hidden), AssertionFailure);
  EXPECT_EQ(*m.get_buf(slot), record_for(1));  // refused writes changed nothing
  m.free(slot);
  try {
    m.free(slot);
    ADD_FAILURE() << "double free accepted";
  } catch (const AssertionFailure& e) {
    EXPECT_NE(std::string(e.what()).find("double free"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.get_buf(slot), AssertionFailure);  // get_buf of a freed slot
  EXPECT_EQ(m.available_size(), 3);
  EXPECT_THROW(MetadataBuffers(MetadataBuffersOptions{.slot_count = 0}), AssertionFailure);
  SanityReport report;
  m.sanity_check(report);
  EXPECT_TRUE(report.ok()) << report.summary();
}

// Goal: sanity_check names each kind of corruption with its stable invariant and the slot.
TEST(MetadataBuffers, SanityCheckReportsStaleFieldsAndFreeListDamage) {
  {
    MetadataBuffers m(kOptions);
    MetadataBuffersTestPeer::row(m, 1).bootstrap_room = 42;  // slot 1 is free
    SanityReport report;
    m.sanity_check(report);
    ASSERT_TRUE(report.has("metadata.stale_field")) << report.summary();
    EXPECT_EQ(report.first()->slot, 1);
    EXPECT_NE(report.first()->detail.find("bootstrap_room"), std::string::npos);
  }
  {
    MetadataBuffers m(kOptions);
    MetadataBuffersTestPeer::row(m, 2).hidden_state[3] = std::byte{1};
    MetadataBuffersTestPeer::row(m, 0).top_k_ids.push_back(1);
    SanityReport report;
    m.sanity_check(report);
    EXPECT_EQ(report.violations().size(), 2u) << report.summary();
    EXPECT_TRUE(report.has("metadata.stale_field"));
  }
  {
    MetadataBuffers m(kOptions);
    const MetadataSlot held = *m.alloc();
    MetadataBuffersTestPeer::free_slots(m).push_back(held);  // allocated and listed
    SanityReport report;
    m.sanity_check(report);
    ASSERT_TRUE(report.has("metadata.free_list")) << report.summary();
    EXPECT_EQ(report.first()->slot, held);
  }
  {
    MetadataBuffers m(kOptions);
    std::vector<MetadataSlot>& list = MetadataBuffersTestPeer::free_slots(m);
    list.back() = list.front();  // one slot listed twice, another leaked
    SanityReport report;
    m.sanity_check(report);
    EXPECT_EQ(report.violations().size(), 2u) << report.summary();
    EXPECT_TRUE(report.has("metadata.free_list"));
  }
  {
    MetadataBuffers m(kOptions);
    MetadataBuffersTestPeer::free_slots(m).push_back(7);
    SanityReport report;
    m.sanity_check(report);
    EXPECT_TRUE(report.has("metadata.free_list")) << report.summary();
  }
  {
    // An allocated slot may hold anything: only free slots must be cleared.
    MetadataBuffers m(kOptions);
    m.set_buf(*m.alloc(), record_for(4));
    SanityReport report;
    m.sanity_check(report);
    EXPECT_TRUE(report.ok()) << report.summary();
  }
}

}  // namespace
}  // namespace kvsim
