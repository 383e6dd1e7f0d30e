// Hopper's asynchronous copy machinery for the warp-specialized kernels: mbarriers (arrive,
// expect a byte count, wait on a phase parity), tensor-memory-accelerator tile loads
// (cp.async.bulk.tensor, completing on an mbarrier), cp.async arrivals on an mbarrier, bulk
// reductions into global memory (cp.reduce.async.bulk), setmaxnreg (moves registers
// between the warpgroups of a block; sm_90a), and the turns two consumer warpgroups take.
//
// A ring stage's "full" barrier completes once per fill (its producer arrivals plus, for
// TMA, the bytes it announced); the "empty" barrier once the consumers are done with it.
// Fill n of a stage completes phase n, so waiters pass the parity n & 1; a producer's first
// wait on an empty barrier passes parity 1, which a fresh barrier reports as complete (the
// phase before phase 0).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "mma.cuh"

namespace kernels::flash::detail::sm90 {

__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
// After initialising barriers that the copy engine completes on, before the block-wide barrier.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(std::uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_addr(bar))
               : "memory");
}
// One arrival that also announces `bytes` the copy engine will deliver to this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrier_wait(std::uint64_t* bar, unsigned parity) {
  const std::uint32_t addr = smem_addr(bar);
  std::uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(addr), "r"(parity)
        : "memory");
  } while (!done);
}
// The mbarrier receives one arrival once every cp.async this thread issued before has landed
// (noinc: the arrival is part of the count the barrier was initialised with).
__device__ __forceinline__ void cp_async_arrive(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// A box of a 4-D tensor map at coordinates (c0 innermost .. c3) into shared memory at dst,
// completing `bar`'s transaction bytes. map: the address of a __grid_constant__ parameter.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, std::uint64_t* bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

// Copy-engine reduction from shared memory into global memory: dst[i] += src[i] for `bytes`
// (a multiple of 16, both 16-byte aligned) of fp32, each element added atomically. Tracked by
// the issuing thread's bulk groups: commit, then wait until the source has been read (.read:
// the buffer may be rewritten) or until the writes are done.
// src: a shared-memory address (smem_addr).
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, std::uint32_t src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// Registers per thread of the executing warpgroup (all its warps execute it, same N).
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

// Turns between consumer warpgroups (ping-pong for two, round robin for more): each issues its
// MMAs only after the one before it has issued its own, so the tensor cores run one warpgroup's
// MMAs while the others do their element-wise work, instead of all finishing together and all
// then leaving them idle. Named barrier `first + w` is warpgroup w's turn: its 128 threads sync
// on it, the previous warpgroup's 128 threads arrive. Every warpgroup must pass the same number
// of issue points (wait, issue, pass); the last warpgroup arrives once on warpgroup 0's barrier
// before its first and not after its last, so every barrier completes as often as it is synced
// on and none is left half-arrived at exit. Turns in strict order keep at most one arrival
// pending on any barrier.
struct Turns {
  bool on;
  int wg;         // which consumer warpgroup this thread belongs to, 0..count - 1
  int first;      // the first of the `count` named barriers
  int count = 2;  // consumer warpgroups taking turns
  __device__ void start() const {
    if (on && wg == count - 1) arrive(first);
  }
  __device__ void wait() const {
    if (on) asm volatile("bar.sync %0, 256;\n" ::"r"(first + wg) : "memory");
  }
  __device__ void pass(bool last) const {
    if (on && !(last && wg == count - 1)) arrive(first + (wg + 1 == count ? 0 : wg + 1));
  }
  // For loops that learn only after their last issue point that it was the last (pass(false)
  // there): warpgroup 0 takes the last warpgroup's final arrival, so no barrier is left half-arrived.
  __device__ void finish() const {
    if (on && wg == 0) wait();
  }
  static __device__ void arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
};

}  // namespace kernels::flash::detail::sm90
