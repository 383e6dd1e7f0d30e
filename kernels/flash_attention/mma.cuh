// Warp-level building blocks shared by the flash-attention kernels: Ampere/Hopper
// mma.sync m16n8k16 (fp32 accumulate), ldmatrix, cp.async, and the register layouts.
//
// Layout of one m16n8k16 product for lane = 4*g + t (g = lane/4, t = lane%4):
//   A 16x16: a[0] = (row g,   k 2t..2t+1), a[1] = (row g+8, k 2t..2t+1),
//            a[2] = (row g,   k 2t+8..+9), a[3] = (row g+8, k 2t+8..+9)
//   B 16x8:  b[0] = (k 2t..2t+1, col g),   b[1] = (k 2t+8..+9, col g)
//   C 16x8:  c[0..1] = (row g, col 2t..2t+1), c[2..3] = (row g+8, col 2t..2t+1)
// Two neighbouring C tiles (cols 0..7 and 8..15) hold exactly the A layout of a
// 16x16 operand, so a softmax result feeds the next product without shared memory.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/math.hpp"

namespace kernels::flash::detail {

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], const std::uint32_t (&a)[4],
                                                  const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], const std::uint32_t (&a)[4],
                                                         const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two fp32 values rounded to one 32-bit register of T (lo in the low half).
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi);

template <>
__device__ __forceinline__ std::uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&h);
}

template <>
__device__ __forceinline__ std::uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<std::uint32_t*>(&h);
}

__device__ __forceinline__ std::uint32_t load32(const std::uint16_t* p) {
  return *reinterpret_cast<const std::uint32_t*>(p);
}

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices, transposed on the way: lane l names row (l & 15) of a
// 16-row slab at column offset 8*(l >> 4). r[0..1] is the B operand of columns
// n0..n0+7 and r[2..3] of n0+8..n0+15, for B[k][n] stored row-major by k.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const std::uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// Four 8x8 b16 matrices as stored; lane l names the row address of matrix l/8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const std::uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// A operand of rows row0..row0+15, columns k0..k0+15 of a row-major shared tile.
template <int LD>
__device__ __forceinline__ void load_a_frag(std::uint32_t (&a)[4], const std::uint16_t* s, int row0, int k0, int lane) {
  const int m = lane / 8;
  ldmatrix_x4(a, s + (row0 + (lane % 8) + 8 * (m % 2)) * LD + k0 + 8 * (m / 2));
}

// B operands of C columns n0..n0+7 (b[0..1]) and n0+8..n0+15 (b[2..3]) at k0..k0+15,
// for B[k][n] = M[n][k] with M row-major in shared memory (K for S = Q K^T).
template <int LD>
__device__ __forceinline__ void load_b_pair_nk(std::uint32_t (&b)[4], const std::uint16_t* m, int n0, int k0, int lane) {
  ldmatrix_x4(b, m + (n0 + (lane % 8) + 8 * (lane / 16)) * LD + k0 + 8 * ((lane / 8) % 2));
}

// 16 bytes global -> shared without registers; rows past the end read as zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

// rows x D 16-bit elements from global (row stride ld elements) into shared memory, 16
// bytes per cp.async, element (r, col) at dst(r, col); rows >= valid and columns >= cols
// (a head dim padded up to the kernel's D; cols a multiple of 8) read as zeros and touch no
// global memory. load_tile_async (below, padded rows) and wgmma.cuh's load_tile_sw128
// (swizzled) differ only in dst.
// Each thread keeps one column and steps THREADS / (D / 8) rows a pass, a fixed number of
// passes: the compiler unrolls it, and the row's swizzle and both addresses move by
// constants. A tid-strided loop (c = tid; c < ROWS * D / 8; c += THREADS) is not unrolled
// (the compiler cannot bound tid) and spent about ten integer instructions and a branch on
// every 16-byte copy (README, version log). Every tile the kernels load divides evenly
// (checked at compile time).
template <int ROWS, int D, int THREADS, typename Dst>
__device__ __forceinline__ void load_rows_async(const std::uint16_t* g, long long ld, int valid, int cols, int tid,
                                                Dst dst) {
  constexpr int kChunks = D / 8;
  static_assert(THREADS % kChunks == 0 && ROWS * kChunks % THREADS == 0,
                "load_rows_async: the threads must cover whole rows and the tile whole passes");
  constexpr int kRowsPerPass = THREADS / kChunks;
  const int r0 = tid / kChunks, col = (tid % kChunks) * 8;
  const bool col_ok = col < cols;
  const std::uint16_t* src = g + r0 * ld + col;
  const long long step = kRowsPerPass * ld;
#pragma unroll
  for (int pass = 0; pass < ROWS * kChunks / THREADS; ++pass) {
    const int r = r0 + pass * kRowsPerPass;
    const bool ok = col_ok && r < valid;
    cp_async16(dst(r, col), ok ? src + pass * step : g, ok);
  }
}

// rows x D elements (row stride D in global, D + kPad in shared); rows >= valid are zero.
constexpr int kPad = 8;  // 16 bytes: rows shift by 4 banks, so fragment loads do not conflict
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile_async(std::uint16_t* s, const std::uint16_t* g, int valid, int tid) {
  load_rows_async<ROWS, D, THREADS>(g, D, valid, D, tid, [s](int r, int col) { return s + r * (D + kPad) + col; });
}

// Sum / max over the four lanes of a quad, which share one accumulator row.
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace kernels::flash::detail
