/* Chapter 5 of docs/guide/05a-stream-scopes.md (rule 4): asynchronous copies and host memory lifetimes.
 *
 * A 64 MiB copy is queued behind about 20 ms of kernel work (`spin`) on the same stream,
 * so it cannot start right away. Right after the copy call returns, the host overwrites
 * (or frees) its buffer. What does the device get?
 *
 *   1. host to device from pinned memory (cuMemHostAlloc), overwritten after the call
 *   2. the same from pageable memory (malloc)
 *   3. device to host into pinned memory: how much has arrived when the call returns
 *   4. the same into pageable memory
 *   5. host to device from pinned memory that is freed (cuMemFreeHost) after the call
 *
 *   nvcc -o /tmp/async_host_memory docs/c/async_host_memory.c -lcuda
 *   /tmp/async_host_memory kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs every program here; async_host_memory.out is what this one
 * printed on the GPU machine. */
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

/* The first and last element of the device buffer. */
static void print_device_ends(CUdeviceptr dev) {
    unsigned int first = 0, last = 0;
    CUresult r1 = cuMemcpyDtoH(&first, dev, 4);
    CUresult r2 = cuMemcpyDtoH(&last, dev + BYTES - 4, 4);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
        printf("  => cannot read the device buffer back (%s)\n", err_name(r1 != CUDA_SUCCESS ? r1 : r2));
    else
        printf("  => the device got: first element %u, last element %u\n", first, last);
}

static void host_to_device_then_overwrite(const char *kind, unsigned int *host, CUdeviceptr dev) {
    printf("%s memory, host to device; the host writes 2 over its 1s right after the call:\n", kind);
    fill(host, 1);
    MUST(cuMemsetD32(dev, 0, N));
    MUST(cuCtxSynchronize());
    queue_spin();
    double t0 = now_ms();
    CUresult r = cuMemcpyHtoDAsync(dev, host, BYTES, stream);
    double took = now_ms() - t0;
    printf("  cuMemcpyHtoDAsync(dev, host, 64 MiB, stream) -> %s, returned after %.2f ms\n", err_name(r), took);
    fill(host, 2);
    CALL(cuStreamSynchronize(stream));
    print_device_ends(dev);
}

static void device_to_host(const char *kind, unsigned int *host, CUdeviceptr dev) {
    printf("%s memory, device to host; the device holds 5s, the host 0s:\n", kind);
    fill(host, 0);
    MUST(cuMemsetD32(dev, 5, N));
    MUST(cuCtxSynchronize());
    queue_spin();
    double t0 = now_ms();
    CUresult r = cuMemcpyDtoHAsync(host, dev, BYTES, stream);
    double took = now_ms() - t0;
    unsigned int first = ((volatile unsigned int *)host)[0];
    unsigned int last = ((volatile unsigned int *)host)[N - 1];
    printf("  cuMemcpyDtoHAsync(host, dev, 64 MiB, stream) -> %s, returned after %.2f ms\n", err_name(r), took);
    printf("  => right after the call: first element %u, last element %u (5 = arrived)\n", first, last);
    CALL(cuStreamSynchronize(stream));
    printf("  => after cuStreamSynchronize: %zu of %u\n", count(host, 5), N);
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&spin, module, "spin"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    CUdeviceptr on_device;
    unsigned int *pinned = NULL;
    unsigned int *pageable = malloc(BYTES);
    if (pageable == NULL) return 2;
    MUST(cuMemAlloc(&on_device, BYTES));
    MUST(cuMemHostAlloc((void **)&pinned, BYTES, 0));
    printf("Each copy is queued behind about 20 ms of kernel work on the same stream.\n");

    host_to_device_then_overwrite("1. Pinned", pinned, on_device);
    host_to_device_then_overwrite("2. Pageable", pageable, on_device);
    device_to_host("3. Pinned", pinned, on_device);
    device_to_host("4. Pageable", pageable, on_device);

    printf("5. Pinned memory, host to device; the host frees the buffer right after the call:\n");
    fill(pinned, 1);
    MUST(cuMemsetD32(on_device, 0, N));
    MUST(cuCtxSynchronize());
    queue_spin();
    CALL(cuMemcpyHtoDAsync(on_device, pinned, BYTES, stream));
    double t0 = now_ms();
    CUresult r = cuMemFreeHost(pinned);
    printf("  cuMemFreeHost(pinned) -> %s, returned after %.2f ms\n", err_name(r), now_ms() - t0);
    CALL(cuStreamSynchronize(stream));
    print_device_ends(on_device);

    free(pageable);
    CALL(cuCtxDestroy(ctx));
    return 0;
}
