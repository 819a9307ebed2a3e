/* Chapter 6 of docs/guide/06-kernels.md (rule 5): what stays unsafe. A kernel is told a buffer is longer
 * than it is: `scale(x, n, 0.0)` with `n` past the end of `x`. Nothing checks a kernel's
 * bounds: the neighbouring buffer is overwritten, and every call reports success.
 *
 *   nvcc -o /tmp/out_of_bounds docs/c/out_of_bounds.c -lcuda && /tmp/out_of_bounds kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs every program here; out_of_bounds.out is what this one
 * printed on the GPU machine, and out_of_bounds.sanitizer.out what compute-sanitizer
 * reported for it. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static const char *err_name(CUresult r) {
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}

/* Prints a driver call and its result. */
static CUresult show(const char *call, CUresult r) {
    printf("  %s -> %s\n", call, err_name(r));
    return r;
}
#define CALL(call) show(#call, (call))
/* A call the demonstration needs: printed, and the end of the program if it fails. */
#define MUST(call) do { if (show(#call, (call)) != CUDA_SUCCESS) exit(2); } while (0)

/* cuCtxCreate took a parameter block from CUDA 13 on. */
static CUresult create_context(CUcontext *ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(ctx, NULL, 0, dev);
#else
    return cuCtxCreate(ctx, 0, dev);
#endif
}

#define LEN 256 /* floats in each buffer */

static void print_floats(const char *what, CUdeviceptr p) {
    float h[4] = {0};
    CUresult r = cuMemcpyDtoH(h, p, sizeof h);
    if (r != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r));
    else
        printf("  => %s: %g %g %g %g\n", what, h[0], h[1], h[2], h[3]);
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction scale;
    CUstream stream;
    CUdeviceptr a, b;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&scale, module, "scale"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    printf("Two buffers of %d floats, both holding 1.0:\n", LEN);
    MUST(cuMemAlloc(&a, LEN * sizeof(float)));
    MUST(cuMemAlloc(&b, LEN * sizeof(float)));
    MUST(cuMemsetD32(a, 0x3f800000u /* 1.0f */, LEN));
    MUST(cuMemsetD32(b, 0x3f800000u, LEN));
    MUST(cuCtxSynchronize());
    /* Give the kernel the buffer at the lower address, with a length that reaches into
     * the other one. */
    CUdeviceptr target = a < b ? a : b, other = a < b ? b : a;
    unsigned long long gap = other - target;
    printf("  => the second buffer starts %llu bytes after the first\n", gap);
    if (gap > (64ull << 20)) {
        printf("  (too far apart for this demonstration)\n");
        return 1;
    }
    size_t n = gap / sizeof(float) + 4; /* the first 4 elements of the other buffer */
    float zero = 0.0f;
    void *params[] = {&target, &n, &zero};
    printf("`scale(first, %zu, 0.0)`: the first buffer has %d elements, the kernel is told %zu:\n", n, LEN, n);
    CALL(cuLaunchKernel(scale, 1, 1, 1, 256, 1, 1, 0, stream, params, NULL));
    CALL(cuStreamSynchronize(stream));
    print_floats("the second buffer", other);
    CALL(cuCtxDestroy(ctx));
    return 0;
}
