/* docs/driver-facts.md, "Host memory and asynchronous copies": two non-blocking streams of
 * one context run independently. Stream `a` gets about 20 ms of kernel work (`spin`), then
 * a fill of a buffer with 7s; stream `c` gets a copy of the same buffer into page-locked
 * host memory. Which does the host see: the 0s from before the fill, or the 7s? Then the
 * same with an order: `c` waits for an event recorded on `a` after the fill.
 *
 *   nvcc -o /tmp/two_streams docs/c/facts/two_streams.c -lcuda
 *   /tmp/two_streams kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/;
 * docs/c/facts/two_streams.out is what it printed on the GPU machine. */
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

#define N (1u << 20) /* elements of 4 bytes */
static long long spin_cycles = 34000000; /* about 20 ms at the H100's 1.7 GHz */

static size_t count(const unsigned int *host, unsigned int value) {
    size_t c = 0;
    for (size_t i = 0; i < N; i++) c += host[i] == value;
    return c;
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction spin;
    CUstream a, c;
    CUevent filled;
    CUdeviceptr buffer;
    unsigned int *host = NULL;
    void *params[] = {&spin_cycles};
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&spin, module, "spin"));
    MUST(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&filled, CU_EVENT_DISABLE_TIMING));
    MUST(cuMemAlloc(&buffer, N * 4));
    MUST(cuMemHostAlloc((void **)&host, N * 4, 0));

    printf("1. No order between the streams; the buffer holds 0s, the host 1s:\n");
    MUST(cuMemsetD32(buffer, 0, N));
    MUST(cuCtxSynchronize());
    for (size_t i = 0; i < N; i++) host[i] = 1;
    MUST(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, a, params, NULL));
    CALL(cuMemsetD32Async(buffer, 7, N, a));
    CALL(cuMemcpyDtoHAsync(host, buffer, N * 4, c));
    CALL(cuStreamSynchronize(c));
    printf("  => the host got %zu 0s and %zu 7s of %u\n", count(host, 0), count(host, 7), N);
    CALL(cuStreamSynchronize(a));

    printf("2. The same, with `c` waiting for an event recorded on `a` after the fill:\n");
    MUST(cuMemsetD32(buffer, 0, N));
    MUST(cuCtxSynchronize());
    for (size_t i = 0; i < N; i++) host[i] = 1;
    MUST(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, a, params, NULL));
    CALL(cuMemsetD32Async(buffer, 7, N, a));
    CALL(cuEventRecord(filled, a));
    CALL(cuStreamWaitEvent(c, filled, 0));
    CALL(cuMemcpyDtoHAsync(host, buffer, N * 4, c));
    CALL(cuStreamSynchronize(c));
    printf("  => the host got %zu 0s and %zu 7s of %u\n", count(host, 0), count(host, 7), N);

    CALL(cuCtxDestroy(ctx));
    return 0;
}
