// Kernels of cuda-brand's graph and host-function tests (tests/graphs.rs) and of the graph
// benchmark (bench/benches/graphs.rs).
//
// Regenerate the committed PTX (CUDA 11.8 here, V11.8.89):
//   nvcc -ptx -arch=sm_70 tests/kernels/graphs.cu -o tests/kernels/graphs.ptx
// then lower `.version 7.8` to `.version 7.4` by hand, as for kernels/kernels.ptx (nothing
// in it needs a newer ISA; `ptxas -arch=sm_70` and `-arch=sm_90` of CUDA 11.8 assemble it),
// so it loads on the crate's minimum driver (CUDA 11.4).
//
// The crate's convention: a slice parameter (`In<T>` / `Out<T>` on the Rust side) is two C
// parameters, the pointer and its element count, and every access stays below the count.

#include <stddef.h>

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// y[i] = a * x[i] + b (wrapping), for i below both lengths.
extern "C" __global__ void affine_u32(const unsigned *x, size_t x_len, unsigned *y, size_t y_len,
                                      unsigned a, unsigned b) {
    size_t n = x_len < y_len ? x_len : y_len;
    GRID_STRIDE(i, n) { y[i] = a * x[i] + b; }
}

// c[i] = a[i] + b[i] (wrapping), for i below all three lengths.
extern "C" __global__ void add_u32(const unsigned *a, size_t a_len, const unsigned *b, size_t b_len,
                                   unsigned *c, size_t c_len) {
    size_t n = a_len < b_len ? a_len : b_len;
    n = n < c_len ? n : c_len;
    GRID_STRIDE(i, n) { c[i] = a[i] + b[i]; }
}

// x[i] = x[i] * x[i] (wrapping).
extern "C" __global__ void square_u32(unsigned *x, size_t x_len) {
    GRID_STRIDE(i, x_len) { x[i] = x[i] * x[i]; }
}

// x[i] = v.
extern "C" __global__ void set_u32(unsigned *x, size_t x_len, unsigned v) {
    GRID_STRIDE(i, x_len) { x[i] = v; }
}

// x[i] += 1: the tiny dependent kernel of the benchmark (100 in a row on one buffer).
extern "C" __global__ void add_one_f32(float *x, size_t x_len) {
    GRID_STRIDE(i, x_len) { x[i] += 1.0f; }
}

// Keeps its stream busy for about `cycles` clock cycles (one thread is enough).
extern "C" __global__ void spin_cycles(unsigned long long cycles) {
    long long start = clock64();
    while ((unsigned long long)(clock64() - start) < cycles) {
    }
}
