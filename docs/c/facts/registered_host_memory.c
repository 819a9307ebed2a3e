/* docs/driver-facts.md, "Host memory and asynchronous copies": the third kind of host
 * memory, next to docs/c/async_host_memory.c's pinned and pageable buffers. A plain
 * malloc'd buffer (a Vec, in Rust) that some code registered with cuMemHostRegister is
 * page-locked: is an asynchronous copy from or into it as asynchronous as one of pinned
 * memory?
 *
 * As in async_host_memory.c, a 64 MiB copy is queued behind about 20 ms of kernel work
 * (`spin`) on the same stream:
 *
 *   1. host to device; the host overwrites the buffer right after the call
 *   2. device to host: what has arrived when the call returns
 *
 *   nvcc -o /tmp/registered_host_memory docs/c/facts/registered_host_memory.c -lcuda
 *   /tmp/registered_host_memory kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/;
 * docs/c/facts/registered_host_memory.out is what it printed on the GPU machine. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

#define N (16u << 20)                 /* 16 Mi elements of 4 bytes: 64 MiB */
#define BYTES ((size_t)N * sizeof(unsigned int))
static long long spin_cycles = 34000000; /* about 20 ms at the H100's 1.7 GHz */

static CUfunction spin;
static CUstream stream;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Keeps the stream busy for about 20 ms, so that the next operation on it waits. */
static void queue_spin(void) {
    void *params[] = {&spin_cycles};
    MUST(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
}

static void fill(unsigned int *host, unsigned int value) {
    for (size_t i = 0; i < N; i++) host[i] = value;
}

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
    CUdeviceptr on_device;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&spin, module, "spin"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&on_device, BYTES));
    unsigned int *host = malloc(BYTES);
    if (host == NULL) return 2;
    fill(host, 0);
    printf("A malloc'd buffer of 64 MiB, registered by \"other code\":\n");
    MUST(cuMemHostRegister(host, BYTES, 0));
    printf("Each copy is queued behind about 20 ms of kernel work on the same stream.\n");

    printf("1. Registered memory, host to device; the host writes 2 over its 1s right after the call:\n");
    fill(host, 1);
    MUST(cuMemsetD32(on_device, 0, N));
    MUST(cuCtxSynchronize());
    queue_spin();
    double t0 = now_ms();
    CUresult r = cuMemcpyHtoDAsync(on_device, host, BYTES, stream);
    double took = now_ms() - t0;
    fill(host, 2);
    printf("  cuMemcpyHtoDAsync(dev, host, 64 MiB, stream) -> %s, returned after %.2f ms\n", err_name(r), took);
    CALL(cuStreamSynchronize(stream));
    unsigned int first = 0, last = 0;
    MUST(cuMemcpyDtoH(&first, on_device, 4));
    MUST(cuMemcpyDtoH(&last, on_device + BYTES - 4, 4));
    printf("  => the device got: first element %u, last element %u (1 = before the overwrite, 2 = after)\n",
           first, last);

    printf("2. Registered memory, device to host; the device holds 5s, the host 0s:\n");
    fill(host, 0);
    MUST(cuMemsetD32(on_device, 5, N));
    MUST(cuCtxSynchronize());
    queue_spin();
    t0 = now_ms();
    r = cuMemcpyDtoHAsync(host, on_device, BYTES, stream);
    took = now_ms() - t0;
    first = ((volatile unsigned int *)host)[0];
    last = ((volatile unsigned int *)host)[N - 1];
    printf("  cuMemcpyDtoHAsync(host, dev, 64 MiB, stream) -> %s, returned after %.2f ms\n", err_name(r), took);
    printf("  => right after the call: first element %u, last element %u (5 = arrived)\n", first, last);
    CALL(cuStreamSynchronize(stream));
    printf("  => after cuStreamSynchronize: %zu of %u\n", count(host, 5), N);

    MUST(cuMemHostUnregister(host));
    free(host);
    CALL(cuCtxDestroy(ctx));
    return 0;
}
