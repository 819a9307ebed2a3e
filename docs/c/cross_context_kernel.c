/* Chapter 3 of docs/guide/03-one-context.md (rule 2): one context's memory in another context.
 *
 * A kernel of context B writes a buffer of context A, and B copies its own memory into
 * A's buffer. Both contexts are on the same device, which has unified addressing: every
 * device pointer is a plain address the hardware can reach from any context.
 *
 *   nvcc -o /tmp/cross_context_kernel docs/c/cross_context_kernel.c -lcuda
 *   /tmp/cross_context_kernel kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs every program here; cross_context_kernel.out is what this
 * one printed on the GPU machine. */
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
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));

    printf("Context A, and a buffer of A holding 1.0 four times:\n");
    CUcontext A, B;
    MUST(create_context(&A, dev));
    CUdeviceptr in_a;
    MUST(cuMemAlloc(&in_a, 4 * sizeof(float)));
    MUST(cuMemsetD32(in_a, 0x3f800000u /* 1.0f */, 4));
    print_floats("A's buffer", in_a);

    printf("Context B (now current), with its own module and stream:\n");
    MUST(create_context(&B, dev));
    CUmodule module_of_b;
    CUfunction scale_of_b;
    CUstream stream_of_b;
    MUST(cuModuleLoad(&module_of_b, ptx));
    MUST(cuModuleGetFunction(&scale_of_b, module_of_b, "scale"));
    MUST(cuStreamCreate(&stream_of_b, CU_STREAM_NON_BLOCKING));

    printf("B's kernel `scale(x, 4, 7.0)` on B's stream, given A's buffer:\n");
    size_t n = 4;
    float k = 7.0f;
    void *params[] = {&in_a, &n, &k};
    CALL(cuLaunchKernel(scale_of_b, 1, 1, 1, 32, 1, 1, 0, stream_of_b, params, NULL));
    CALL(cuStreamSynchronize(stream_of_b));
    print_floats("A's buffer", in_a);

    printf("A copy from B's memory into A's buffer, B current:\n");
    CUdeviceptr in_b;
    MUST(cuMemAlloc(&in_b, 4 * sizeof(float)));
    MUST(cuMemsetD32(in_b, 0x40000000u /* 2.0f */, 4));
    CALL(cuMemcpyDtoD(in_a, in_b, 4 * sizeof(float)));
    print_floats("A's buffer", in_a);

    CALL(cuCtxDestroy(B));
    CALL(cuCtxDestroy(A));
    return 0;
}
