// Kernels used by cuda-brand's tests, examples and benchmarks.
//
// Regenerate the committed PTX on a machine with CUDA (see kernels/README.md):
//   nvcc -ptx -arch=compute_52 kernels/kernels.cu -o kernels/kernels.ptx  (then .version 7.4)
//
// Convention of the crate's typed kernels: a slice parameter (`In<T>` / `Out<T>` on the
// Rust side) is TWO C parameters, the pointer and its element count, so that a kernel
// can keep every access in bounds whatever the caller passes.

#include <stddef.h>

// c[i] = a[i] + b[i] for i below all three lengths.
extern "C" __global__ void vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
                                      float *c, size_t c_len) {
    size_t n = a_len < b_len ? a_len : b_len;
    n = n < c_len ? n : c_len;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        c[i] = a[i] + b[i];
    }
}

// x[i] *= k.
extern "C" __global__ void scale(float *x, size_t x_len, float k) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < x_len; i += (size_t)gridDim.x * blockDim.x) {
        x[i] *= k;
    }
}

// out[0] += sum of in[]: a grid-stride loop, a shared-memory tree per block, one atomicAdd
// per block. Integers, so the result is exact whatever the order. Needs blockDim.x to be a
// power of two and at most 1024.
extern "C" __global__ void sum_u64(const unsigned int *in, size_t in_len, unsigned long long *out, size_t out_len) {
    __shared__ unsigned long long partial[1024];
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < in_len; i += (size_t)gridDim.x * blockDim.x) {
        acc += in[i];
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && out_len > 0) atomicAdd(out, partial[0]);
}

// Does nothing with its one slice: the launch-overhead benchmark.
extern "C" __global__ void empty(float *p, size_t p_len) {
    if (p_len == 0xffffffffffffffffull) p[0] = 0.0f;
}

// Eight parameters (four slices, as pointer + length), also doing nothing.
extern "C" __global__ void empty8(float *a, size_t na, float *b, size_t nb, const float *c, size_t nc,
                                  const float *d, size_t nd) {
    if ((na & nb & nc & nd) == 0xffffffffffffffffull) a[0] = b[0] + c[0] + d[0];
}

// Writes through a wild pointer: an illegal address, a sticky error of the context.
extern "C" __global__ void write_wild(float *p, size_t p_len) {
    volatile float *wild = (float *)(0x10ull + (unsigned long long)p_len * 0);
    *wild = 1.0f;
}

// Module globals, read and written from the host through `Module::global`.
__device__ int counter;
__device__ float table[16];

// counter += by; table[i] = i * by.
extern "C" __global__ void bump(int by) {
    if (threadIdx.x == 0 && blockIdx.x == 0) counter += by;
    if (threadIdx.x < 16) table[threadIdx.x] = (float)threadIdx.x * (float)by;
}

// Spins for about `cycles` clock cycles: keeps a stream busy in tests.
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// ---- Kernels written the way NVIDIA's samples write them: pointers without lengths, sizes
// as `int` scalars. Declared with `InPtr<T>` / `OutPtr<T>` on the Rust side (one C parameter
// each); how far they reach is the declaration's promise (see `cuda_brand::samples`).

// y[i] = a * x[i] + y[i] for i < n.
extern "C" __global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// C = A + B, as in cuda-samples' 0_Introduction/vectorAdd.
extern "C" __global__ void vectorAdd(const float *A, const float *B, float *C, int numElements) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < numElements) {
        C[i] = A[i] + B[i] + 0.0f;
    }
}

// One partial sum per block of 2 * blockDim.x inputs, in dynamic shared memory of blockDim.x
// floats, as in cuda-samples' 2_Concepts_and_Techniques/reduction (reduce3). Needs blockDim.x
// to be a power of two and blockDim.x * sizeof(float) bytes of dynamic shared memory.
extern "C" __global__ void reduce(const float *g_idata, float *g_odata, unsigned int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    float mySum = (i < n) ? g_idata[i] : 0.0f;
    if (i + blockDim.x < n) mySum += g_idata[i + blockDim.x];
    sdata[tid] = mySum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] = mySum = mySum + sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = mySum;
}

// A five-point average over a pitched 2D array of width x height floats; each pitch is in
// bytes, as cudaMallocPitch (cuMemAllocPitch) gives it. Edges repeat their nearest value.
extern "C" __global__ void stencil2d(const float *in, size_t inPitch, float *out, size_t outPitch,
                                     int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width || y >= height) return;
    const float *row = (const float *)((const char *)in + (size_t)y * inPitch);
    const float *up = y > 0 ? (const float *)((const char *)row - inPitch) : row;
    const float *down = y + 1 < height ? (const float *)((const char *)row + inPitch) : row;
    float c = row[x];
    float l = x > 0 ? row[x - 1] : c;
    float r = x + 1 < width ? row[x + 1] : c;
    float *orow = (float *)((char *)out + (size_t)y * outPitch);
    orow[x] = 0.2f * (c + l + r + up[x] + down[x]);
}
