// Kernels for launches with attributes (tests/modules.rs, bench/benches/launch_ex.rs):
// thread-block clusters and cooperative launches. Clusters need sm_90, so this file is
// compiled for it alone (see kernels/README.md):
//   nvcc -ptx -arch=sm_90 kernels/launch_ex.cu -o kernels/launch_ex_sm90.ptx   (CUDA 11.8)
//
// The crate's convention: a slice parameter (`In<T>` / `Out<T>`) is TWO C parameters, the
// pointer and its element count, and every kernel stays below the counts it is given.

#include <stddef.h>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

// What block b sees of its cluster, in out[4b .. 4b+4]: its rank in the cluster, the
// cluster's size in blocks, the cluster's x index in the grid, and whether the launch gave
// an explicit cluster (1) or not (0: every block is a cluster of one).
__device__ void write_cluster_info(unsigned *out, size_t out_len) {
    unsigned rank, size, cluster_x, explicit_cluster;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(cluster_x));
    asm volatile("{ .reg .pred p; mov.pred p, %%is_explicit_cluster; selp.u32 %0, 1, 0, p; }"
                 : "=r"(explicit_cluster));
    size_t i = 4 * (size_t)blockIdx.x;
    if (threadIdx.x == 0 && i + 4 <= out_len) {
        out[i] = rank;
        out[i + 1] = size;
        out[i + 2] = cluster_x;
        out[i + 3] = explicit_cluster;
    }
}

extern "C" __global__ void cluster_info(unsigned *out, size_t out_len) {
    write_cluster_info(out, out_len);
}

// The same, compiled for clusters of two blocks: launches without a cluster attribute get
// clusters of two; a launch asking for another shape is refused.
extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_info_fixed(unsigned *out, size_t out_len) {
    write_cluster_info(out, out_len);
}

// A grid-wide sum that needs a cooperative launch: each block adds its part of `in` into
// out[block], the grid synchronizes, then block 0 writes the total into out[gridDim.x].
// Launched without the cooperative attribute the grid cannot synchronize
// (`is_valid()` is false) and the kernel returns at once, writing nothing.
extern "C" __global__ void grid_sum(const unsigned *in, size_t in_len, unsigned *out, size_t out_len) {
    cg::grid_group grid = cg::this_grid();
    if (!grid.is_valid()) return;
    if (threadIdx.x == 0 && blockIdx.x < out_len) out[blockIdx.x] = 0;
    grid.sync();
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < in_len && blockIdx.x < out_len) atomicAdd(&out[blockIdx.x], in[i]);
    grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0 && out_len > gridDim.x) {
        unsigned total = 0;
        for (unsigned b = 0; b < gridDim.x; b++) total += out[b];
        out[gridDim.x] = total;
    }
}

// Does nothing with its one slice: the launch-overhead benchmark with attributes.
extern "C" __global__ void empty_ex(float *p, size_t p_len) {
    if (p_len == 0xffffffffffffffffull) p[0] = 0.0f;
}
