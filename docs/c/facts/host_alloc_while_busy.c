/* Issue 28: does making page-locked host memory wait for the GPU? A sync stream's bounce
 * ring is made at a thread's first small upload, possibly while other threads' work keeps
 * the context busy. Raw driver calls only (no crate).
 *
 * The primary context; stream S (non-blocking) gets ~1 s of memsets of a 1 GiB buffer
 * (queued, not waited for). While they run, the host times, each once:
 *   cuMemHostAlloc(1 MiB), cuMemFreeHost of it, malloc + cuMemHostRegister(1 MiB),
 *   cuMemHostUnregister, cuStreamCreate(non-blocking), cuEventCreate,
 *   cuMemAllocFromPoolAsync(4 KiB, default pool, legacy stream) + cuMemFreeAsync
 * and then how long the memsets still had to run (cuStreamSynchronize(S)). Before those,
 * malloc + cuMemHostRegister(1 MiB) and cuMemHostUnregister are timed first, with the
 * whole queue still ahead (cuMemFreeHost drains it), with the memsets left after them
 * (the "first" lines; added after a review found the "busy" register and unregister
 * timed behind cuMemFreeHost's wait). The same calls
 * timed again with the GPU idle. A call that waits for the GPU takes about as long as
 * the memsets left.
 *
 *   nvcc -o /tmp/host_alloc_while_busy docs/c/facts/host_alloc_while_busy.c -lcuda
 *   /tmp/host_alloc_while_busy
 *
 * docs/c/facts/host_alloc_while_busy.out is what the first version (no "first" lines)
 * printed on an H100; host_alloc_while_busy.h200.out is what this version printed on an
 * H200. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void registers(const char *when, CUstream s) {
    void *m = aligned_alloc(4096, 1 << 20);
    double t = now_us(); CK(cuMemHostRegister(m, 1 << 20, 0));
    printf("%-5s cuMemHostRegister 1 MiB       %10.1f us\n", when, now_us() - t);
    t = now_us(); CK(cuMemHostUnregister(m));
    printf("%-5s cuMemHostUnregister 1 MiB     %10.1f us\n", when, now_us() - t);
    free(m);
    printf("%-5s memsets still queued           %10s\n", when,
           cuStreamQuery(s) == CUDA_ERROR_NOT_READY ? "yes" : "no");
}

static void calls(const char *when) {
    double t;
    void *p;
    t = now_us(); CK(cuMemHostAlloc(&p, 1 << 20, 0));
    printf("%-5s cuMemHostAlloc 1 MiB          %10.1f us\n", when, now_us() - t);
    t = now_us(); CK(cuMemFreeHost(p));
    printf("%-5s cuMemFreeHost 1 MiB           %10.1f us\n", when, now_us() - t);
    void *m = aligned_alloc(4096, 1 << 20);
    t = now_us(); CK(cuMemHostRegister(m, 1 << 20, 0));
    printf("%-5s cuMemHostRegister 1 MiB       %10.1f us\n", when, now_us() - t);
    t = now_us(); CK(cuMemHostUnregister(m));
    printf("%-5s cuMemHostUnregister 1 MiB     %10.1f us\n", when, now_us() - t);
    free(m);
    CUstream s2;
    CUevent e;
    t = now_us(); CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    printf("%-5s cuStreamCreate                %10.1f us\n", when, now_us() - t);
    t = now_us(); CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    printf("%-5s cuEventCreate                 %10.1f us\n", when, now_us() - t);
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));
    CUmemoryPool pool;
    CK(cuDeviceGetDefaultMemPool(&pool, dev));
    CUdeviceptr d;
    t = now_us();
    CK(cuMemAllocFromPoolAsync(&d, 4096, pool, NULL));
    CK(cuMemFreeAsync(d, NULL));
    printf("%-5s pool alloc+free, legacy stream %9.1f us\n", when, now_us() - t);
    CK(cuEventDestroy(e));
    CK(cuStreamDestroy(s2));
}

int main(void) {
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr big;
    size_t n = (size_t)1 << 28;
    CK(cuMemAlloc(&big, n * 4));
    CK(cuMemsetD32Async(big, 0, n, s)); /* warm-up */
    CK(cuStreamSynchronize(s));
    double t = now_us();
    CK(cuMemsetD32Async(big, 1, n, s));
    CK(cuStreamSynchronize(s));
    double one = now_us() - t;
    int fills = (int)(1e6 / one) + 1;
    printf("one 1 GiB memset: %.1f us; queueing %d of them\n", one, fills);
    t = now_us();
    for (int i = 0; i < fills; i++) CK(cuMemsetD32Async(big, (unsigned)i, n, s));
    printf("queued in %.1f us\n", now_us() - t);
    registers("first", s);
    calls("busy");
    double left = now_us();
    CK(cuStreamSynchronize(s));
    printf("busy  memsets left after the calls %10.1f us (of %.1f us queued)\n",
           now_us() - left, now_us() - t);
    calls("idle");
    CK(cuMemFree(big));
    CK(cuStreamDestroy(s));
    CK(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
