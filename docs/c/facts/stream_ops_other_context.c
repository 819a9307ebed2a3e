/* docs/driver-facts.md, "Cross-context behaviour": which operations on context A's own
 * stream, event and memory need A to be current. Context A has a module, a stream, an
 * event and a buffer; then context B is created (and current), and every operation below
 * names only A's handles. Part 2 repeats the stream operations with no context current at
 * all. (docs/c/cross_context_stream.c mixes A's handles with B's; this program never
 * does.)
 *
 *   nvcc -o /tmp/stream_ops_other_context docs/c/facts/stream_ops_other_context.c -lcuda
 *   /tmp/stream_ops_other_context kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/;
 * docs/c/facts/stream_ops_other_context.out is what it printed on the GPU machine. */
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

static CUcontext A, B;
static CUmodule module_of_a;
static CUfunction scale_of_a;
static CUstream stream_of_a;
static CUevent event_of_a;
static CUdeviceptr in_a;

static const char *which(CUcontext c) {
    if (c == NULL) return "none";
    if (c == A) return "A";
    if (c == B) return "B";
    return "another context";
}

static void show_current(void) {
    CUcontext current = NULL;
    cuCtxGetCurrent(&current);
    printf("  => current context: %s\n", which(current));
}

/* Reads A's buffer back with a copy queued on A's own stream, then synchronizes it. */
static void print_floats(const char *what) {
    float h[4] = {0};
    CUresult r = cuMemcpyDtoHAsync(h, in_a, sizeof h, stream_of_a);
    if (r == CUDA_SUCCESS) r = cuStreamSynchronize(stream_of_a);
    if (r != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r));
    else
        printf("  => %s: %g %g %g %g\n", what, h[0], h[1], h[2], h[3]);
}

/* The stream operations: every one on A's stream, with A's event, function and memory. */
static void stream_operations(float k) {
    float twos[4] = {2.0f, 2.0f, 2.0f, 2.0f};
    size_t n = 4;
    void *params[] = {&in_a, &n, &k};
    CUdeviceptr scratch = 0;
    CUcontext owner = NULL;
    CALL(cuMemsetD32Async(in_a, 0x3f800000u /* 1.0f */, 4, stream_of_a));
    CALL(cuMemcpyHtoDAsync(in_a, twos, sizeof twos, stream_of_a));
    CALL(cuLaunchKernel(scale_of_a, 1, 1, 1, 32, 1, 1, 0, stream_of_a, params, NULL));
    CALL(cuEventRecord(event_of_a, stream_of_a));
    CALL(cuStreamWaitEvent(stream_of_a, event_of_a, 0));
    CALL(cuEventSynchronize(event_of_a));
    CALL(cuStreamSynchronize(stream_of_a));
    print_floats("A's buffer (2 scaled by the kernel)");
    if (CALL(cuMemAllocAsync(&scratch, 1024, stream_of_a)) == CUDA_SUCCESS) {
        CALL(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, scratch));
        printf("  => the pool memory's context attribute: %s\n", which(owner));
        CALL(cuMemFreeAsync(scratch, stream_of_a));
        CALL(cuStreamSynchronize(stream_of_a));
    }
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));

    printf("Context A: module, function `scale`, stream, event, and a buffer of 4 floats:\n");
    MUST(create_context(&A, dev));
    MUST(cuModuleLoad(&module_of_a, ptx));
    MUST(cuModuleGetFunction(&scale_of_a, module_of_a, "scale"));
    MUST(cuStreamCreate(&stream_of_a, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&event_of_a, CU_EVENT_DEFAULT));
    MUST(cuMemAlloc(&in_a, 4 * sizeof(float)));
    printf("Context B, created after A, so B is current:\n");
    MUST(create_context(&B, dev));
    show_current();

    printf("1. A's stream operations while B is current (`scale(x, 4, 3.0)`):\n");
    stream_operations(3.0f);
    printf("   Synchronous operations on A's memory while B is current:\n");
    float h[4] = {0};
    CALL(cuMemsetD32(in_a, 0x40a00000u /* 5.0f */, 4));
    CALL(cuMemcpyDtoH(h, in_a, sizeof h));
    printf("  => A's buffer: %g %g %g %g\n", h[0], h[1], h[2], h[3]);

    printf("2. The same stream operations with no context current (`scale(x, 4, 4.0)`):\n");
    CUcontext popped = NULL;
    MUST(cuCtxPopCurrent(&popped));
    MUST(cuCtxPopCurrent(&popped));
    show_current();
    stream_operations(4.0f);
    printf("   A synchronous copy from A's memory with no context current:\n");
    CALL(cuMemcpyDtoH(h, in_a, sizeof h));

    MUST(cuCtxPushCurrent(A));
    CALL(cuCtxDestroy(B));
    CALL(cuCtxDestroy(A));
    return 0;
}
