/* Chapter 10 of docs/guide/10-graphs.md: a buffer freed while an instantiated graph still uses it.
 *
 * A graph is captured once: a kernel that doubles every element of a buffer (`scale`). It
 * is instantiated and replayed; then the host frees the buffer, allocates a new one of the
 * same size (the driver may hand out the same address), fills it with 5, and replays the
 * graph. Does the launch fail, or does the graph double the new buffer?
 *
 *   1. memory from cuMemAlloc, freed with cuMemFree
 *   2. memory from cuMemAllocAsync (stream-ordered), freed with cuMemFreeAsync
 *   3. pinned host memory the graph copies from (cuMemHostAlloc), freed with cuMemFreeHost
 *      and allocated again with other data
 *
 *   nvcc -o /tmp/graph_freed_buffer docs/c/graph_freed_buffer.c -lcuda
 *   /tmp/graph_freed_buffer kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs every program here; graph_freed_buffer.out is what this one
 * printed on the GPU machine. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

#define N (1u << 20) /* elements of 4 bytes */

static CUfunction scale;
static CUstream stream, capture_stream;

static void print_ends(const char *what, CUdeviceptr p) {
    float first = 0, last = 0;
    CUresult r1 = cuMemcpyDtoH(&first, p, 4);
    CUresult r2 = cuMemcpyDtoH(&last, p + (size_t)(N - 1) * 4, 4);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r1 != CUDA_SUCCESS ? r1 : r2));
    else
        printf("  => %s: first element %g, last element %g\n", what, first, last);
}

/* Captures `scale(x, N, 2.0)` (and, with `from_host`, a copy of `from_host` into `x` before
 * it) and instantiates it. */
static CUgraphExec capture_doubling(CUdeviceptr x, const void *from_host) {
    size_t n = N;
    float k = 2.0f;
    void *params[] = {&x, &n, &k};
    CUgraph graph;
    CUgraphExec exec;
    MUST(cuStreamBeginCapture(capture_stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    if (from_host)
        MUST(cuMemcpyHtoDAsync(x, from_host, N * 4, capture_stream));
    MUST(cuLaunchKernel(scale, N / 256, 1, 1, 256, 1, 1, 0, capture_stream, params, NULL));
    MUST(cuStreamEndCapture(capture_stream, &graph));
    MUST(cuGraphInstantiateWithFlags(&exec, graph, 0));
    MUST(cuGraphDestroy(graph));
    return exec;
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUgraphExec exec;
    CUdeviceptr buffer, again;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&scale, module, "scale"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&capture_stream, CU_STREAM_NON_BLOCKING));

    printf("1. Memory from cuMemAlloc; the graph doubles it; freed with cuMemFree:\n");
    MUST(cuMemAlloc(&buffer, N * 4));
    MUST(cuMemsetD32(buffer, 0x3f800000u /* 1.0f */, N));
    exec = capture_doubling(buffer, NULL);
    MUST(cuGraphLaunch(exec, stream));
    MUST(cuStreamSynchronize(stream));
    print_ends("after one replay (2 = doubled)", buffer);
    CALL(cuMemFree(buffer));
    MUST(cuMemAlloc(&again, N * 4));
    MUST(cuMemsetD32(again, 0x40a00000u /* 5.0f */, N));
    printf("  => the new buffer %s the freed buffer's address\n", again == buffer ? "has" : "does not have");
    CALL(cuGraphLaunch(exec, stream));
    CALL(cuStreamSynchronize(stream));
    print_ends("the new buffer after a replay (5 = untouched, 10 = doubled by the graph)", again);
    CALL(cuGraphExecDestroy(exec));
    CALL(cuMemFree(again));

    printf("2. Memory from cuMemAllocAsync; the graph doubles it; freed with cuMemFreeAsync:\n");
    MUST(cuMemAllocAsync(&buffer, N * 4, stream));
    MUST(cuMemsetD32Async(buffer, 0x3f800000u /* 1.0f */, N, stream));
    MUST(cuStreamSynchronize(stream));
    exec = capture_doubling(buffer, NULL);
    MUST(cuGraphLaunch(exec, stream));
    MUST(cuStreamSynchronize(stream));
    print_ends("after one replay (2 = doubled)", buffer);
    CALL(cuMemFreeAsync(buffer, stream));
    MUST(cuMemAllocAsync(&again, N * 4, stream));
    MUST(cuMemsetD32Async(again, 0x40a00000u /* 5.0f */, N, stream));
    MUST(cuStreamSynchronize(stream));
    printf("  => the new buffer %s the freed buffer's address\n", again == buffer ? "has" : "does not have");
    CALL(cuGraphLaunch(exec, stream));
    CALL(cuStreamSynchronize(stream));
    print_ends("the new buffer after a replay (5 = untouched, 10 = doubled by the graph)", again);
    CALL(cuGraphExecDestroy(exec));
    CALL(cuMemFreeAsync(again, stream));
    CALL(cuStreamSynchronize(stream));

    printf("3. Pinned host memory the graph copies in (1s); freed with cuMemFreeHost:\n");
    float *host, *host_again;
    MUST(cuMemAlloc(&buffer, N * 4));
    MUST(cuMemHostAlloc((void **)&host, N * 4, 0));
    for (unsigned i = 0; i < N; i++) host[i] = 1.0f;
    exec = capture_doubling(buffer, host);
    MUST(cuGraphLaunch(exec, stream));
    MUST(cuStreamSynchronize(stream));
    print_ends("after one replay (2 = copied and doubled)", buffer);
    uintptr_t freed = (uintptr_t)host; /* the graph keeps this address */
    CALL(cuMemFreeHost(host));
    MUST(cuMemHostAlloc((void **)&host_again, N * 4, 0));
    for (unsigned i = 0; i < N; i++) host_again[i] = 7.0f;
    printf("  => the new host buffer %s the freed buffer's address\n", (uintptr_t)host_again == freed ? "has" : "does not have");
    MUST(cuMemsetD32(buffer, 0, N));
    CALL(cuGraphLaunch(exec, stream));
    CALL(cuStreamSynchronize(stream));
    print_ends("the device buffer after a replay (2 = old data, 14 = the new host buffer's 7s, 0 = no copy)", buffer);
    CALL(cuGraphExecDestroy(exec));
    CALL(cuMemFreeHost(host_again));
    CALL(cuMemFree(buffer));

    CALL(cuCtxDestroy(ctx));
    return 0;
}
