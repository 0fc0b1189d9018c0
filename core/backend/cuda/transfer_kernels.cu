#include "core/backend/cuda/transfer_kernels.cuh"

namespace kvsim {
namespace {

constexpr unsigned int kThreadsPerBlock = 256;

__global__ void kv_transfer_kernel(KvTransferArgs args, KvTransferFault* fault) {
  const uint64_t total = kv_total_words(args);
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t flat = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; flat < total;
       flat += stride) {
    KvWord w;
    if (kv_word(args, flat, &w)) {
      args.dst_words[w.dst] = args.src_words[w.src];
      continue;
    }
    if (atomicAdd(&fault->count, 1ull) == 0) {  // the first fault names itself
      fault->serial = args.serial;
      fault->index = w.bad_index;
      fault->side = w.bad_side;
      fault->position = w.bad_position;
    }
  }
}

}  // namespace

cudaError_t launch_kv_transfer(const KvTransferArgs& args, KvTransferFault* fault,
                               unsigned int max_blocks, cudaStream_t stream) {
  const uint64_t total = kv_total_words(args);
  if (total == 0) return cudaSuccess;
  const uint64_t wanted = (total + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const unsigned int blocks = static_cast<unsigned int>(wanted < max_blocks ? wanted : max_blocks);
  kv_transfer_kernel<<<blocks, kThreadsPerBlock, 0, stream>>>(args, fault);
  return cudaGetLastError();
}

}  // namespace kvsim
