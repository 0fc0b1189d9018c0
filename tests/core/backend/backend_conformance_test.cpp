// Backend conformance: the semantics of backend.h, checked the same way on every backend.
//
// One parameterised suite, instantiated for "cpu" (CpuBackend) and, where the CUDA backend is
// built, "cuda" (kernel transfer path) and "cuda_direct" (cudaMemcpyAsync runs). The cases use
// only Backend calls, so the CPU emulation runs exactly when a blocking call (synchronize*,
// read_sync) drives it. Where a case needs a stream to stand still, a Harness "gate" does it:
// on the CPU, a wait on an event of a gate stream that nothing has driven; on CUDA, the
// backend's hold() kernel. Every "cuda" case skips, with CUDA's reason, when there is no GPU.
//
// Every case can fail: each checks a value that a backend breaking the rule would get wrong
// (reordered ops, a missing wait, a block reused too early or never, bytes read at the wrong
// time, a wrong address in a transfer). After each case the backend is synchronized and must
// report no violations.
//
// At the end, two host-only tests of the CUDA backend's transfer arithmetic (the kernel's
// kv_word and the direct path's plan) run without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cpu_backend.h"
#include "core/common/assert.h"

#if KVSIM_HAVE_CUDA
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/transfer_addressing.h"
#include "core/backend/cuda/transfer_direct.h"
#endif

namespace kvsim {
namespace {

// --- Harnesses: how to build each backend and hold one of its streams -----------------------

class Harness {
 public:
  virtual ~Harness() = default;
  virtual bool available(std::string* why) const = 0;
  virtual std::unique_ptr<Backend> make(size_t device_bytes_max) const = 0;
  // Later work on `stream` waits until open(gate); false if this backend cannot hold it now.
  virtual bool close(Backend& b, StreamId stream, uint32_t* gate) = 0;
  // Lets the gate go; false if it had already let go by itself (the checks made are void).
  virtual bool open(Backend& b, uint32_t gate) = 0;
  virtual void open_all(Backend& b) = 0;
  // Whether transfer_kv_async waits on the host for its stream (CUDA's direct path does).
  virtual bool transfers_wait_for_stream() const { return false; }
};

// CPU: nothing runs until a blocking call drives it, so a gate is a wait on an event of a
// fresh stream with one op queued; no call between close and open drives it.
class CpuHarness final : public Harness {
 public:
  bool available(std::string*) const override { return true; }
  std::unique_ptr<Backend> make(size_t device_bytes_max) const override {
    return std::make_unique<CpuBackend>(CpuBackendOptions{.device_bytes_max = device_bytes_max});
  }
  bool close(Backend& b, StreamId stream, uint32_t* gate) override {
    const StreamId g = b.create_stream("gate");
    const Block scratch = b.allocate(MemoryKind::kPinnedHost, 8, g, "gate scratch");
    const std::byte one{1};
    b.upload_async(g, scratch, 0, std::span<const std::byte>(&one, 1), "gate");
    b.wait_event(stream, b.record_event(g));
    *gate = g;
    return true;
  }
  bool open(Backend&, uint32_t) override { return true; }  // the next blocking call drives it
  void open_all(Backend&) override {}
};

#if KVSIM_HAVE_CUDA
class CudaHarness final : public Harness {
 public:
  explicit CudaHarness(TransferPath path) : path_(path) {}
  bool available(std::string* why) const override { return cuda_device_available(why); }
  std::unique_ptr<Backend> make(size_t device_bytes_max) const override {
    return std::make_unique<CudaBackend>(
        CudaBackendOptions{.transfer_path = path_, .device_bytes_max = device_bytes_max});
  }
  bool close(Backend& b, StreamId stream, uint32_t* gate) override {
    auto& cuda = static_cast<CudaBackend&>(b);
    // Asked once per process, on a stream of its own: under a tool that serializes a stream's
    // work (compute-sanitizer initcheck, CUDA_LAUNCH_BLOCKING) a copy enqueued behind a hold
    // returns only when the hold lets go, and the case cannot hold anything.
    static const bool holds_queue_work = cuda.holds_queue_work(b.create_stream("hold probe"));
    if (!holds_queue_work) return false;
    *gate = cuda.hold(stream, 20.0);
    return !cuda.hold_timed_out(*gate);  // already let go: launches are serialized here
  }
  bool open(Backend& b, uint32_t gate) override {
    auto& cuda = static_cast<CudaBackend&>(b);
    const bool held = !cuda.hold_timed_out(gate);
    cuda.release(gate);
    return held;
  }
  void open_all(Backend& b) override { static_cast<CudaBackend&>(b).release_all_holds(); }
  bool transfers_wait_for_stream() const override { return path_ == TransferPath::kDirect; }

 private:
  TransferPath path_;
};
#endif

std::unique_ptr<Harness> make_harness(const std::string& name) {
#if KVSIM_HAVE_CUDA
  if (name == "cuda") return std::make_unique<CudaHarness>(TransferPath::kKernel);
  if (name == "cuda_direct") return std::make_unique<CudaHarness>(TransferPath::kDirect);
#endif
  KV_ASSERT(name == "cpu", "unknown backend " + name);
  return std::make_unique<CpuHarness>();
}

std::vector<std::string> backend_names() {
#if KVSIM_HAVE_CUDA
  return {"cpu", "cuda", "cuda_direct"};
#else
  return {"cpu"};
#endif
}

// --- Helpers ---------------------------------------------------------------------------------

std::vector<std::byte> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> out(n);
  for (std::byte& b : out)
    b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

std::vector<std::byte> filled(size_t n, int value) {
  return std::vector<std::byte>(n, static_cast<std::byte>(value));
}

// Index of the first differing byte, or -1.
int64_t first_difference(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  if (a.size() != b.size()) return 0;
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin());
  return ia == a.end() ? -1 : ia - a.begin();
}

// Byte-for-byte equality, reporting the first difference instead of both whole buffers.
::testing::AssertionResult same_bytes(const std::vector<std::byte>& got,
                                      const std::vector<std::byte>& expected) {
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure()
           << "got " << got.size() << " bytes, expected " << expected.size();
  }
  const int64_t i = first_difference(got, expected);
  if (i < 0) return ::testing::AssertionSuccess();
  const auto at = static_cast<size_t>(i);
  return ::testing::AssertionFailure()
         << "byte " << i << " of " << got.size() << " is " << std::to_integer<int>(got[at])
         << ", expected " << std::to_integer<int>(expected[at]);
}

Block upload_new(Backend& b, MemoryKind kind, std::span<const std::byte> bytes, StreamId stream,
                 const char* label) {
  const Block block = b.allocate(kind, bytes.size(), stream, label);
  KV_ASSERT(block.valid(), std::string("allocation failed: ") + label);
  b.upload_async(stream, block, 0, bytes, label);
  return block;
}

std::span<const std::byte> as_bytes(const std::vector<int64_t>& v) {
  return std::as_bytes(std::span<const int64_t>(v));
}

// An index buffer: device memory filled by upload_async, or pinned memory written in place.
Block index_block(Backend& b, MemoryKind kind, const std::vector<int64_t>& idx, StreamId stream) {
  if (kind == MemoryKind::kDevice) return upload_new(b, kind, as_bytes(idx), stream, "indices");
  const Block block = b.allocate(kind, idx.size() * sizeof(int64_t), stream, "indices");
  KV_ASSERT(block.valid(), "pinned index allocation failed");
  std::memcpy(block.ptr, idx.data(), idx.size() * sizeof(int64_t));
  return block;
}

// --- Fixture ---------------------------------------------------------------------------------

class BackendConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    harness_ = make_harness(GetParam());
    std::string why;
    if (!harness_->available(&why)) GTEST_SKIP() << "no CUDA device: " << why;
    backend_ = harness_->make(0);
  }
  void TearDown() override {
    if (!backend_) return;
    harness_->open_all(*backend_);
    if (IsSkipped()) return;
    backend_->synchronize();
    for (const BackendViolation& v : backend_->violations())
      ADD_FAILURE() << "violation " << v.kind << ": " << v.detail;
  }

  Backend& backend() { return *backend_; }
  bool close(StreamId stream, uint32_t* gate) { return harness_->close(*backend_, stream, gate); }
  bool open(uint32_t gate) { return harness_->open(*backend_, gate); }

  ScopedThrowingAsserts throwing_asserts_;  // a failed KV_ASSERT fails the test, not the run
  std::unique_ptr<Harness> harness_;
  std::unique_ptr<Backend> backend_;
};

#define CLOSE_OR_SKIP(stream, gate)                                                        \
  do {                                                                                     \
    if (!close((stream), &(gate))) {                                                       \
      GTEST_SKIP() << "this backend could not hold a stream (kernel launches serialized, " \
                      "e.g. CUDA_LAUNCH_BLOCKING or a sanitizer mode)";                    \
    }                                                                                      \
  } while (0)

// --- Copies, uploads, read_sync --------------------------------------------------------------

TEST_P(BackendConformance, UploadThenReadSyncRoundTrips) {
  Backend& b = backend();
  std::mt19937_64 rng(1);
  for (MemoryKind kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, size_t{(1u << 20) + 3}}) {
      SCOPED_TRACE(std::string(to_string(residency_of(kind))) + " " + std::to_string(n));
      const std::vector<std::byte> bytes = random_bytes(rng, n);
      const Block block = b.allocate(kind, n + 16, b.compute_stream(), "block");
      ASSERT_TRUE(block.valid());
      EXPECT_EQ(block.bytes, n + 16);
      EXPECT_EQ(block.kind, kind);
      b.upload_async(b.compute_stream(), block, 16, bytes, "up");
      EXPECT_TRUE(same_bytes(b.read_sync(block, 16, n), bytes));
      const size_t half = n / 2;
      EXPECT_TRUE(same_bytes(
          b.read_sync(block, 16 + half, n - half),
          std::vector<std::byte>(bytes.begin() + static_cast<ptrdiff_t>(half), bytes.end())));
      b.free(block);
    }
  }
}

TEST_P(BackendConformance, UploadCapturesTheHostBytesAtEnqueue) {
  Backend& b = backend();
  const StreamId s = b.create_stream("s");
  const Block block = b.allocate(MemoryKind::kDevice, 64 * 1024, s, "block");
  std::vector<std::byte> bytes = filled(64 * 1024, 0x11);
  uint32_t gate = 0;
  CLOSE_OR_SKIP(s, gate);
  b.upload_async(s, block, 0, bytes, "up");  // cannot run before open
  std::fill(bytes.begin(), bytes.end(), std::byte{0x22});
  ASSERT_TRUE(open(gate));
  EXPECT_TRUE(same_bytes(b.read_sync(block, 0, bytes.size()), filled(64 * 1024, 0x11)));
}

TEST_P(BackendConformance, CopyAsyncMovesBytesBetweenEveryKind) {
  Backend& b = backend();
  std::mt19937_64 rng(2);
  constexpr size_t kBytes = 300 * 1024 + 40;
  for (MemoryKind dst_kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
    for (MemoryKind src_kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
      SCOPED_TRACE(std::string(to_string(residency_of(src_kind))) + " -> " +
                   std::string(to_string(residency_of(dst_kind))));
      const std::vector<std::byte> bytes = random_bytes(rng, kBytes);
      const Block src = upload_new(b, src_kind, bytes, 0, "src");
      const Block dst = upload_new(b, dst_kind, filled(kBytes + 24, 0x5A), 0, "dst");
      b.copy_async(0, dst, 24, src, 8, kBytes - 8, "copy");
      std::vector<std::byte> expected = filled(kBytes + 24, 0x5A);
      std::copy(bytes.begin() + 8, bytes.end(), expected.begin() + 24);
      const std::vector<std::byte> got = b.read_sync(dst, 0, kBytes + 24);
      EXPECT_TRUE(same_bytes(got, expected));
      if (dst_kind == MemoryKind::kPinnedHost) {  // rule 4: pinned memory is host-addressable
        EXPECT_EQ(std::memcmp(dst.ptr, expected.data(), expected.size()), 0);
      }
      b.free(src);
      b.free(dst);
    }
  }
}

TEST_P(BackendConformance, SynchronizeStreamWaitsForItsWork) {
  Backend& b = backend();
  std::mt19937_64 rng(3);
  const StreamId s = b.create_stream("s");
  const std::vector<std::byte> bytes = random_bytes(rng, 4 << 20);
  const Block device = upload_new(b, MemoryKind::kDevice, bytes, s, "device");
  const Block host = b.allocate(MemoryKind::kPinnedHost, bytes.size(), s, "host");
  b.copy_async(s, host, 0, device, 0, bytes.size(), "download");
  b.synchronize_stream(s);
  EXPECT_EQ(std::memcmp(host.ptr, bytes.data(), bytes.size()), 0);  // no read_sync needed
}

// --- Streams and events ----------------------------------------------------------------------

TEST_P(BackendConformance, OneStreamRunsItsOpsInEnqueueOrder) {
  Backend& b = backend();
  const StreamId s = b.create_stream("s");
  constexpr size_t kBytes = 256 * 1024;
  const Block x = b.allocate(MemoryKind::kDevice, kBytes, s, "x");
  const Block y = b.allocate(MemoryKind::kDevice, kBytes, s, "y");
  const Block z = b.allocate(MemoryKind::kPinnedHost, kBytes, s, "z");
  uint32_t gate = 0;
  CLOSE_OR_SKIP(s, gate);
  b.upload_async(s, x, 0, filled(kBytes, 1), "A");
  b.copy_async(s, y, 0, x, 0, kBytes, "x->y");
  b.upload_async(s, x, 0, filled(kBytes, 2), "B");
  b.copy_async(s, z, 0, x, 0, kBytes, "x->z");
  b.upload_async(s, x, 0, filled(kBytes, 3), "C");
  ASSERT_TRUE(open(gate));
  EXPECT_TRUE(same_bytes(b.read_sync(y, 0, kBytes), filled(kBytes, 1)));
  EXPECT_TRUE(same_bytes(b.read_sync(z, 0, kBytes), filled(kBytes, 2)));
  EXPECT_TRUE(same_bytes(b.read_sync(x, 0, kBytes), filled(kBytes, 3)));
}

TEST_P(BackendConformance, WaitEventOrdersWorkAcrossStreams) {
  Backend& b = backend();
  const StreamId producer = b.create_stream("producer");
  const StreamId consumer = b.create_stream("consumer");
  constexpr size_t kBytes = 128 * 1024;
  const Block data = upload_new(b, MemoryKind::kDevice, filled(kBytes, 7), producer, "data");
  const Block out = upload_new(b, MemoryKind::kDevice, filled(kBytes, 9), consumer, "out");
  b.synchronize();
  uint32_t gate = 0;
  CLOSE_OR_SKIP(producer, gate);
  b.upload_async(producer, data, 0, filled(kBytes, 8), "produce");
  const EventId produced = b.record_event(producer);
  b.wait_event(consumer, produced);
  b.copy_async(consumer, out, 0, data, 0, kBytes, "consume");
  const EventId consumed = b.record_event(consumer);
  EXPECT_FALSE(b.query_event(produced));
  EXPECT_FALSE(b.query_event(consumed));  // the consumer waits for the held producer
  ASSERT_TRUE(open(gate));
  b.synchronize_event(consumed);
  EXPECT_TRUE(b.query_event(consumed));
  EXPECT_TRUE(b.query_event(produced));  // consumed could only complete after it
  EXPECT_TRUE(same_bytes(b.read_sync(out, 0, kBytes), filled(kBytes, 8)));
}

TEST_P(BackendConformance, EventsCompleteWhenTheirStreamPassesThem) {
  Backend& b = backend();
  const StreamId s = b.create_stream("s");
  const Block host = b.allocate(MemoryKind::kPinnedHost, 4096, s, "host");
  std::memset(host.ptr, 0, 4096);
  uint32_t gate = 0;
  CLOSE_OR_SKIP(s, gate);
  b.upload_async(s, host, 0, filled(4096, 0x42), "up");
  const EventId after_upload = b.record_event(s);
  EXPECT_FALSE(b.query_event(after_upload));
  ASSERT_TRUE(open(gate));
  b.synchronize_event(after_upload);
  EXPECT_TRUE(b.query_event(after_upload));
  EXPECT_TRUE(b.query_event(after_upload));               // complete stays complete
  EXPECT_EQ(std::to_integer<int>(host.ptr[4095]), 0x42);  // the work before it has run

  const EventId idle = b.record_event(s);  // nothing pending: completes at once
  b.synchronize_event(idle);
  EXPECT_TRUE(b.query_event(idle));
  const StreamId other = b.create_stream("other");
  b.wait_event(other, idle);  // waiting on a complete event never blocks
  b.upload_async(other, host, 0, filled(1, 0x43), "after wait");
  b.synchronize_stream(other);
  EXPECT_EQ(std::to_integer<int>(host.ptr[0]), 0x43);
}

// --- KV transfers ----------------------------------------------------------------------------

enum class Indices { kRandom, kPages, kRange };

const char* to_string(Indices i) {
  return i == Indices::kRandom ? "random" : i == Indices::kPages ? "pages" : "range";
}

struct TransferCase {
  KVLayout src_layout = KVLayout::kLayerFirst;
  KVLayout dst_layout = KVLayout::kLayerFirst;
  size_t item_bytes = 8;
  int32_t layer_begin = 0;
  int32_t layer_end = 0;
  Indices indices = Indices::kRandom;
  MemoryKind src_kind = MemoryKind::kDevice;
  MemoryKind dst_kind = MemoryKind::kDevice;
  MemoryKind index_kind = MemoryKind::kDevice;

  std::string describe() const {
    return std::string(kvsim::to_string(src_layout)) + "(" +
           std::string(kvsim::to_string(residency_of(src_kind))) + ") -> " +
           std::string(kvsim::to_string(dst_layout)) + "(" +
           std::string(kvsim::to_string(residency_of(dst_kind))) + "), item " +
           std::to_string(item_bytes) + ", layers [" + std::to_string(layer_begin) + ", " +
           std::to_string(layer_end) + "), " + to_string(indices) + " indices in " +
           std::string(kvsim::to_string(residency_of(index_kind))) + " memory";
  }
};

constexpr int64_t kSrcSlots = 64;  // the pools differ in shape, so mixing them up shows
constexpr int64_t kDstSlots = 80;
constexpr int32_t kSrcLayers = 4;
constexpr int32_t kDstLayers = 5;
constexpr size_t kCount = 24;

// `kCount` distinct slots of a pool with `slots` slots, in the given pattern.
std::vector<int64_t> make_indices(Indices pattern, int64_t slots, std::mt19937_64& rng) {
  std::vector<int64_t> out;
  if (pattern == Indices::kRange) {  // one contiguous run
    const auto first = static_cast<int64_t>(rng() % static_cast<uint64_t>(slots - kCount + 1));
    for (size_t i = 0; i < kCount; ++i)
      out.push_back(first + static_cast<int64_t>(i));
    return out;
  }
  if (pattern == Indices::kPages) {  // runs of 8 contiguous slots, pages in shuffled order
    std::vector<int64_t> pages(static_cast<size_t>(slots / 8));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    for (size_t p = 0; p < kCount / 8; ++p) {
      for (int64_t t = 0; t < 8; ++t)
        out.push_back(pages[p] * 8 + t);
    }
    return out;
  }
  std::vector<int64_t> all(static_cast<size_t>(slots));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  return std::vector<int64_t>(all.begin(), all.begin() + kCount);
}

// The host reference: what transfer `t` does to `dst`, item by item.
void reference_transfer(const KVTransfer& t, const std::vector<int64_t>& src_idx,
                        const std::vector<int64_t>& dst_idx, const std::vector<std::byte>& src,
                        std::vector<std::byte>& dst) {
  for (int32_t layer = t.layer_begin; layer < t.layer_end; ++layer) {
    for (size_t i = 0; i < t.count; ++i) {
      const size_t from = t.src.offset(layer, src_idx[i]);
      const size_t to = t.dst.offset(layer, dst_idx[i]);
      std::copy_n(src.begin() + static_cast<ptrdiff_t>(from), t.src.item_bytes,
                  dst.begin() + static_cast<ptrdiff_t>(to));
    }
  }
}

struct TransferSetup {
  KVTransfer transfer;
  std::vector<int64_t> src_idx;
  std::vector<int64_t> dst_idx;
  std::vector<std::byte> src_bytes;
  std::vector<std::byte> expected;
};

// Pools filled on the compute stream, indices chosen, the transfer described (not enqueued).
TransferSetup set_up_transfer(Backend& b, const TransferCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TransferSetup s;
  KVTransfer& t = s.transfer;
  t.src = KVPoolView{.layout = c.src_layout,
                     .slot_count = kSrcSlots,
                     .layer_count = kSrcLayers,
                     .item_bytes = c.item_bytes};
  t.dst = KVPoolView{.layout = c.dst_layout,
                     .slot_count = kDstSlots,
                     .layer_count = kDstLayers,
                     .item_bytes = c.item_bytes};
  s.src_bytes = random_bytes(rng, t.src.total_bytes());
  s.expected = random_bytes(rng, t.dst.total_bytes());  // the destination's old contents
  t.src.block = upload_new(b, c.src_kind, s.src_bytes, 0, "src pool");
  t.dst.block = upload_new(b, c.dst_kind, s.expected, 0, "dst pool");
  s.src_idx = make_indices(c.indices, kSrcSlots, rng);
  s.dst_idx = make_indices(c.indices, kDstSlots, rng);
  t.count = kCount;
  t.layer_begin = c.layer_begin;
  t.layer_end = c.layer_end;
  t.label = c.describe();
  reference_transfer(t, s.src_idx, s.dst_idx, s.src_bytes, s.expected);
  return s;
}

// Runs one case on `stream` (after the pool uploads on the compute stream) and compares the
// whole destination pool with the reference, byte for byte.
void check_transfer(Backend& b, StreamId stream, const TransferCase& c, uint64_t seed) {
  SCOPED_TRACE(c.describe());
  TransferSetup s = set_up_transfer(b, c, seed);
  s.transfer.src_indices = index_block(b, c.index_kind, s.src_idx, 0);
  s.transfer.dst_indices = index_block(b, c.index_kind, s.dst_idx, 0);
  b.wait_event(stream, b.record_event(0));
  b.transfer_kv_async(stream, s.transfer);
  const std::vector<std::byte> got =
      b.read_sync(s.transfer.dst.block, 0, s.transfer.dst.total_bytes());
  EXPECT_TRUE(same_bytes(got, s.expected));
  for (const Block& block :
       {s.transfer.src.block, s.transfer.dst.block, s.transfer.src_indices, s.transfer.dst_indices})
    b.free(block);
}

constexpr KVLayout kLayouts[] = {KVLayout::kLayerFirst, KVLayout::kPageFirst};

TEST_P(BackendConformance, TransferKvEveryLayoutPairItemSizeAndLayerRange) {
  Backend& b = backend();
  const StreamId load = b.create_stream("load");
  uint64_t seed = 100;
  for (KVLayout src_layout : kLayouts) {
    for (KVLayout dst_layout : kLayouts) {
      for (size_t item : {size_t{8}, size_t{24}, size_t{64}, size_t{136}, size_t{512}}) {
        for (auto [begin, end] : {std::pair{0, 4}, std::pair{1, 3}, std::pair{3, 4}}) {
          for (Indices indices : {Indices::kRandom, Indices::kPages, Indices::kRange}) {
            check_transfer(b, load,
                           TransferCase{.src_layout = src_layout,
                                        .dst_layout = dst_layout,
                                        .item_bytes = item,
                                        .layer_begin = begin,
                                        .layer_end = end,
                                        .indices = indices},
                           seed++);
          }
        }
      }
    }
  }
}

TEST_P(BackendConformance, TransferKvBetweenHostAndDevice) {
  Backend& b = backend();
  const StreamId load = b.create_stream("load");
  uint64_t seed = 500;
  const std::pair<MemoryKind, MemoryKind> directions[] = {
      {MemoryKind::kPinnedHost, MemoryKind::kDevice},      // load back
      {MemoryKind::kDevice, MemoryKind::kPinnedHost},      // write back
      {MemoryKind::kPinnedHost, MemoryKind::kPinnedHost},  // host to host
  };
  for (auto [src_kind, dst_kind] : directions) {
    for (KVLayout src_layout : kLayouts) {
      for (KVLayout dst_layout : kLayouts) {
        for (MemoryKind index_kind : {MemoryKind::kDevice, MemoryKind::kPinnedHost}) {
          for (Indices indices : {Indices::kRandom, Indices::kPages}) {
            check_transfer(b, load,
                           TransferCase{.src_layout = src_layout,
                                        .dst_layout = dst_layout,
                                        .item_bytes = 128,
                                        .layer_begin = 0,
                                        .layer_end = 4,
                                        .indices = indices,
                                        .src_kind = src_kind,
                                        .dst_kind = dst_kind,
                                        .index_kind = index_kind},
                           seed++);
          }
        }
      }
    }
  }
}

TEST_P(BackendConformance, TransferKvReadsItsIndicesWhenItRuns) {
  // The index buffer holds other indices when the transfer is enqueued; the right ones are
  // uploaded before it on the same stream. The transfer must use the uploaded ones.
  Backend& b = backend();
  const StreamId load = b.create_stream("load");
  const TransferCase c{.src_layout = KVLayout::kPageFirst,
                       .dst_layout = KVLayout::kLayerFirst,
                       .item_bytes = 64,
                       .layer_begin = 0,
                       .layer_end = 4};
  TransferSetup s = set_up_transfer(b, c, 900);
  std::vector<int64_t> stale(kCount);
  std::iota(stale.begin(), stale.end(), 0);
  s.transfer.src_indices = upload_new(b, MemoryKind::kDevice, as_bytes(stale), 0, "src idx");
  s.transfer.dst_indices = upload_new(b, MemoryKind::kDevice, as_bytes(stale), 0, "dst idx");
  b.synchronize();
  uint32_t gate = 0;
  const bool gated = !harness_->transfers_wait_for_stream();  // a gate would stall the host
  if (gated) {
    CLOSE_OR_SKIP(load, gate);
  }
  b.upload_async(load, s.transfer.src_indices, 0, as_bytes(s.src_idx), "src idx");
  b.upload_async(load, s.transfer.dst_indices, 0, as_bytes(s.dst_idx), "dst idx");
  b.transfer_kv_async(load, s.transfer);
  if (gated) {
    ASSERT_TRUE(open(gate));
  }
  const std::vector<std::byte> got =
      b.read_sync(s.transfer.dst.block, 0, s.transfer.dst.total_bytes());
  EXPECT_TRUE(same_bytes(got, s.expected));
}

TEST_P(BackendConformance, EmptyTransferMovesNothing) {
  Backend& b = backend();
  const TransferCase c{.layer_begin = 0, .layer_end = 4};
  TransferSetup s = set_up_transfer(b, c, 901);
  const std::vector<std::byte> before =
      b.read_sync(s.transfer.dst.block, 0, s.transfer.dst.total_bytes());
  KVTransfer no_items = s.transfer;
  no_items.count = 0;
  b.transfer_kv_async(0, no_items);
  s.transfer.src_indices = index_block(b, MemoryKind::kDevice, s.src_idx, 0);
  s.transfer.dst_indices = index_block(b, MemoryKind::kDevice, s.dst_idx, 0);
  KVTransfer no_layers = s.transfer;
  no_layers.layer_begin = no_layers.layer_end = 2;
  b.transfer_kv_async(0, no_layers);
  EXPECT_TRUE(
      same_bytes(b.read_sync(s.transfer.dst.block, 0, s.transfer.dst.total_bytes()), before));
}

// --- The caching allocator -------------------------------------------------------------------

TEST_P(BackendConformance, FreedBlockIsReusedByTheNextSameSizeAllocationOnItsStream) {
  Backend& b = backend();
  const StreamId other = b.create_stream("other");
  const Block a = b.allocate(MemoryKind::kDevice, 4096, 0, "a");
  b.upload_async(0, a, 0, filled(4096, 1), "pending use on the home stream");
  b.free(a);  // no record_stream: back to stream 0's pool at once
  const Block c = b.allocate(MemoryKind::kDevice, 4096, other, "c");
  EXPECT_NE(c.ptr, a.ptr);  // another stream's pool
  const Block d = b.allocate(MemoryKind::kDevice, 4096, 0, "d");
  EXPECT_EQ(d.ptr, a.ptr);  // the same stream: reused, safe by stream order
  EXPECT_NE(d.id, a.id);    // as a new handout
  b.upload_async(0, d, 0, filled(4096, 2), "new owner");
  EXPECT_TRUE(same_bytes(b.read_sync(d, 0, 4096), filled(4096, 2)));
}

TEST_P(BackendConformance, RecordedBlockWaitsUntilTheOtherStreamPassesTheFreePoint) {
  Backend& b = backend();
  const StreamId load = b.create_stream("load");
  const Block a = b.allocate(MemoryKind::kDevice, 8192, 0, "a");
  uint32_t before_free = 0;
  CLOSE_OR_SKIP(load, before_free);
  b.upload_async(load, a, 0, filled(8192, 1), "use on load");
  b.record_stream(a, load);
  b.free(a);
  const EventId free_point = b.record_event(load);
  uint32_t after_free = 0;
  CLOSE_OR_SKIP(load, after_free);  // later work on load stays queued
  b.upload_async(load, b.allocate(MemoryKind::kDevice, 8, load, "x"), 0, filled(8, 0), "later");

  const Block early = b.allocate(MemoryKind::kDevice, 8192, 0, "early");
  EXPECT_NE(early.ptr, a.ptr);  // load has not passed the free point
  ASSERT_TRUE(open(before_free));
  b.synchronize_event(free_point);
  const Block late = b.allocate(MemoryKind::kDevice, 8192, 0, "late");
  EXPECT_EQ(late.ptr, a.ptr);  // passed it: reused, though later work on load is pending
  ASSERT_TRUE(open(after_free));
}

TEST_P(BackendConformance, RecordingTheAllocationStreamDoesNotDeferReuse) {
  Backend& b = backend();
  const StreamId s = b.create_stream("s");
  const Block a = b.allocate(MemoryKind::kDevice, 4096, s, "a");
  uint32_t gate = 0;
  CLOSE_OR_SKIP(s, gate);
  b.upload_async(s, a, 0, filled(4096, 1), "pending use");
  b.record_stream(a, s);  // its own stream: ignored
  b.free(a);
  const Block c = b.allocate(MemoryKind::kDevice, 4096, s, "c");
  EXPECT_EQ(c.ptr, a.ptr);
  ASSERT_TRUE(open(gate));
}

TEST_P(BackendConformance, AllocateReturnsNullBeyondTheDeviceByteCap) {
  std::unique_ptr<Backend> capped = harness_->make(1 << 20);
  Backend& b = *capped;
  EXPECT_FALSE(b.allocate(MemoryKind::kDevice, 2 << 20, 0, "too big").valid());
  const Block x = b.allocate(MemoryKind::kDevice, 512 << 10, 0, "x");
  ASSERT_TRUE(x.valid());
  EXPECT_FALSE(b.allocate(MemoryKind::kDevice, 768 << 10, 0, "over the cap").valid());
  b.free(x);
  const Block y = b.allocate(MemoryKind::kDevice, 512 << 10, 0, "y");
  ASSERT_TRUE(y.valid());
  EXPECT_EQ(y.ptr, x.ptr);
  EXPECT_TRUE(b.allocate(MemoryKind::kPinnedHost, 2 << 20, 0, "host is not capped").valid());
  b.synchronize();
  EXPECT_TRUE(b.violations().empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendConformance, ::testing::ValuesIn(backend_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// --- The CUDA backend's transfer arithmetic, on the host (no GPU needed) ---------------------

#if KVSIM_HAVE_CUDA

// Host buffers shaped as a transfer's pools, with a reference result.
struct HostTransfer {
  TransferSetup setup;
  std::vector<std::byte> dst_before;
};

HostTransfer host_transfer(const TransferCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  HostTransfer h;
  KVTransfer& t = h.setup.transfer;
  t.src = KVPoolView{.layout = c.src_layout,
                     .slot_count = kSrcSlots,
                     .layer_count = kSrcLayers,
                     .item_bytes = c.item_bytes};
  t.dst = KVPoolView{.layout = c.dst_layout,
                     .slot_count = kDstSlots,
                     .layer_count = kDstLayers,
                     .item_bytes = c.item_bytes};
  t.count = kCount;
  t.layer_begin = c.layer_begin;
  t.layer_end = c.layer_end;
  h.setup.src_bytes = random_bytes(rng, t.src.total_bytes());
  h.dst_before = random_bytes(rng, t.dst.total_bytes());
  h.setup.expected = h.dst_before;
  h.setup.src_idx = make_indices(c.indices, kSrcSlots, rng);
  h.setup.dst_idx = make_indices(c.indices, kDstSlots, rng);
  reference_transfer(t, h.setup.src_idx, h.setup.dst_idx, h.setup.src_bytes, h.setup.expected);
  return h;
}

template <typename Fn>
void for_each_case(Fn fn) {
  for (KVLayout src_layout : kLayouts) {
    for (KVLayout dst_layout : kLayouts) {
      for (size_t item : {size_t{8}, size_t{40}, size_t{512}}) {
        for (auto [begin, end] : {std::pair{0, 4}, std::pair{1, 3}}) {
          for (Indices indices : {Indices::kRandom, Indices::kPages, Indices::kRange}) {
            fn(TransferCase{.src_layout = src_layout,
                            .dst_layout = dst_layout,
                            .item_bytes = item,
                            .layer_begin = begin,
                            .layer_end = end,
                            .indices = indices});
          }
        }
      }
    }
  }
}

TEST(CudaTransferArithmetic, KernelWordAddressesMatchTheReference) {
  uint64_t seed = 2000;
  for_each_case([&](const TransferCase& c) {
    SCOPED_TRACE(c.describe());
    HostTransfer h = host_transfer(c, seed++);
    const KVTransfer& t = h.setup.transfer;
    std::vector<uint64_t> src(h.setup.src_bytes.size() / 8);
    std::vector<uint64_t> dst(h.dst_before.size() / 8);
    std::memcpy(src.data(), h.setup.src_bytes.data(), h.setup.src_bytes.size());
    std::memcpy(dst.data(), h.dst_before.data(), h.dst_before.size());
    const KvTransferArgs args{.src_words = src.data(),
                              .dst_words = dst.data(),
                              .src_indices = h.setup.src_idx.data(),
                              .dst_indices = h.setup.dst_idx.data(),
                              .src_slots = t.src.slot_count,
                              .dst_slots = t.dst.slot_count,
                              .src_layers = t.src.layer_count,
                              .dst_layers = t.dst.layer_count,
                              .src_layout = static_cast<uint8_t>(t.src.layout),
                              .dst_layout = static_cast<uint8_t>(t.dst.layout),
                              .words_per_item = t.src.item_bytes / 8,
                              .count = t.count,
                              .layer_begin = t.layer_begin,
                              .layer_end = t.layer_end};
    const uint64_t total = kv_total_words(args);
    ASSERT_EQ(total,
              static_cast<uint64_t>(t.layer_end - t.layer_begin) * kCount * (t.src.item_bytes / 8));
    for (uint64_t flat = 0; flat < total; ++flat) {  // what every kernel thread does
      KvWord w;
      ASSERT_TRUE(kv_word(args, flat, &w));
      ASSERT_LT(w.src, src.size());
      ASSERT_LT(w.dst, dst.size());
      dst[w.dst] = src[w.src];
    }
    std::vector<std::byte> got(h.dst_before.size());
    std::memcpy(got.data(), dst.data(), got.size());
    EXPECT_TRUE(same_bytes(got, h.setup.expected));
  });
}

TEST(CudaTransferArithmetic, KernelReportsAnIndexOutsideItsPool) {
  const std::vector<int64_t> src_idx = {1, 2};
  const std::vector<int64_t> dst_idx = {3, kDstSlots};  // one past the end
  const KvTransferArgs args{.src_indices = src_idx.data(),
                            .dst_indices = dst_idx.data(),
                            .src_slots = kSrcSlots,
                            .dst_slots = kDstSlots,
                            .src_layers = 1,
                            .dst_layers = 1,
                            .words_per_item = 1,
                            .count = 2,
                            .layer_begin = 0,
                            .layer_end = 1};
  KvWord w;
  EXPECT_TRUE(kv_word(args, 0, &w));
  EXPECT_FALSE(kv_word(args, 1, &w));
  EXPECT_EQ(w.bad_side, 2);
  EXPECT_EQ(w.bad_index, kDstSlots);
  EXPECT_EQ(w.bad_position, 1u);
}

TEST(CudaTransferArithmetic, DirectRunsMatchTheReferenceAndCoalesce) {
  uint64_t seed = 3000;
  for_each_case([&](const TransferCase& c) {
    SCOPED_TRACE(c.describe());
    HostTransfer h = host_transfer(c, seed++);
    const KVTransfer& t = h.setup.transfer;
    std::vector<CopyRun> runs;
    ASSERT_EQ(plan_direct_runs(t, h.setup.src_idx, h.setup.dst_idx, &runs), "");
    std::vector<std::byte> got = h.dst_before;
    uint64_t bytes = 0;
    for (const CopyRun& r : runs) {
      ASSERT_LE(r.src_offset + r.bytes, h.setup.src_bytes.size());
      ASSERT_LE(r.dst_offset + r.bytes, got.size());
      std::memcpy(got.data() + r.dst_offset, h.setup.src_bytes.data() + r.src_offset, r.bytes);
      bytes += r.bytes;
    }
    const uint64_t layers = static_cast<uint64_t>(t.layer_end - t.layer_begin);
    EXPECT_EQ(bytes, layers * kCount * t.src.item_bytes);  // every item exactly once
    EXPECT_TRUE(same_bytes(got, h.setup.expected));
    const bool both_layer_first =
        c.src_layout == KVLayout::kLayerFirst && c.dst_layout == KVLayout::kLayerFirst;
    if (c.indices == Indices::kRange && both_layer_first) {
      EXPECT_EQ(runs.size(), layers);  // one run per layer
    }
  });
}

TEST(CudaTransferArithmetic, DirectPlanRefusesAnIndexOutsideItsPool) {
  KVTransfer t;
  t.src = KVPoolView{.slot_count = 4, .layer_count = 1, .item_bytes = 8};
  t.dst = t.src;
  t.count = 1;
  t.layer_end = 1;
  const std::vector<int64_t> ok = {0};
  const std::vector<int64_t> bad = {-1};
  std::vector<CopyRun> runs;
  EXPECT_NE(plan_direct_runs(t, bad, ok, &runs).find("source index 0 = -1"), std::string::npos);
  EXPECT_TRUE(runs.empty());
  EXPECT_EQ(plan_direct_runs(t, ok, ok, &runs), "");
  EXPECT_EQ(runs.size(), 1u);
}

#endif  // KVSIM_HAVE_CUDA

}  // namespace
}  // namespace kvsim
