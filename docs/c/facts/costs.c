/* docs/driver-facts.md, "Costs": what contexts, allocations and the current-context calls
 * cost, measured with CLOCK_MONOTONIC around each call or loop of calls.
 *
 *   1. cuCtxCreate and cuCtxDestroy
 *   2. cuDevicePrimaryCtxRetain when nobody holds the primary context (it is created), and
 *      while it is held; cuDevicePrimaryCtxRelease
 *   3. cuMemAlloc + cuMemFree of 1 KiB, in a context with no other allocation, and with a
 *      1 MiB allocation alive
 *   4. cuMemAllocAsync + cuMemFreeAsync of 1 KiB from the device's default memory pool
 *   5. cuCtxPushCurrent + cuCtxPopCurrent, cuCtxGetCurrent, cuCtxSetCurrent
 *
 * Every line gives the median of the runs it names; a run of a cheap call is a loop of many
 * calls, divided by their number.
 *
 *   nvcc -o /tmp/costs docs/c/facts/costs.c -lcuda && /tmp/costs
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/; docs/c/facts/costs.out is
 * what it printed on the GPU machine. */
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
/* A call the measurement needs: printed, and the end of the program if it fails. */
#define MUST(call) do { if (show(#call, (call)) != CUDA_SUCCESS) exit(2); } while (0)
/* A call inside a timed loop: silent, and the end of the program if it fails. */
#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    printf("  %s -> %s (line %d)\n", #call, err_name(r_), __LINE__); exit(2); } } while (0)

/* cuCtxCreate took a parameter block from CUDA 13 on. */
static CUresult create_context(CUcontext *ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(ctx, NULL, 0, dev);
#else
    return cuCtxCreate(ctx, 0, dev);
#endif
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n] (sorts v). */
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_RUNS 101

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx, current;
    double t0, v[MAX_RUNS], w[MAX_RUNS];
    char name[256] = "?";
    int driver = 0, pools = 0;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    cuDeviceGetName(name, sizeof name, dev);
    cuDriverGetVersion(&driver);
    cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev);
    printf("device 0: %s; driver API %d.%d; memory pools supported: %d\n", name, driver / 1000,
           driver % 1000 / 10, pools);

    /* 1. A context of its own: created (and pushed), destroyed (and popped). */
    int runs = 5;
    for (int i = 0; i < runs; i++) {
        t0 = now_ns();
        CHECK(create_context(&ctx, dev));
        v[i] = now_ns() - t0;
        t0 = now_ns();
        CHECK(cuCtxDestroy(ctx));
        w[i] = now_ns() - t0;
    }
    printf("1. cuCtxCreate: %.1f ms, cuCtxDestroy: %.1f ms (medians of %d runs, one of each per run)\n",
           median(v, runs) / 1e6, median(w, runs) / 1e6, runs);

    /* 2. The primary context: the first retain creates it, the last release destroys it. */
    for (int i = 0; i < runs; i++) {
        t0 = now_ns();
        CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
        v[i] = now_ns() - t0;
        t0 = now_ns();
        CHECK(cuDevicePrimaryCtxRelease(dev));
        w[i] = now_ns() - t0;
    }
    printf("2. cuDevicePrimaryCtxRetain, nobody holding it: %.1f ms; the release after it: %.1f ms "
           "(medians of %d runs)\n", median(v, runs) / 1e6, median(w, runs) / 1e6, runs);
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    runs = 11;
    for (int i = 0; i < runs; i++) {
        CUcontext again;
        t0 = now_ns();
        for (int k = 0; k < 1000; k++) {
            CHECK(cuDevicePrimaryCtxRetain(&again, dev));
            CHECK(cuDevicePrimaryCtxRelease(dev));
        }
        v[i] = (now_ns() - t0) / 1000;
    }
    printf("   cuDevicePrimaryCtxRetain + cuDevicePrimaryCtxRelease while it is held: %.2f us "
           "(median of %d runs of 1000 pairs)\n", median(v, runs) / 1e3, runs);
    MUST(cuDevicePrimaryCtxRelease(dev));

    /* 3. Synchronous allocation, in a new context that has no other allocation yet. */
    MUST(create_context(&ctx, dev));
    runs = 101;
    for (int i = 0; i < runs; i++) {
        CUdeviceptr p;
        t0 = now_ns();
        CHECK(cuMemAlloc(&p, 1024));
        CHECK(cuMemFree(p));
        v[i] = now_ns() - t0;
    }
    printf("3. cuMemAlloc + cuMemFree, 1 KiB, no other allocation in the context: %.1f us "
           "(median of %d pairs)\n", median(v, runs) / 1e3, runs);
    CUdeviceptr keep;
    MUST(cuMemAlloc(&keep, 1 << 20));
    for (int i = 0; i < runs; i++) {
        CUdeviceptr p;
        t0 = now_ns();
        CHECK(cuMemAlloc(&p, 1024));
        CHECK(cuMemFree(p));
        v[i] = now_ns() - t0;
    }
    printf("   cuMemAlloc + cuMemFree, 1 KiB, with a 1 MiB allocation alive: %.1f us "
           "(median of %d pairs)\n", median(v, runs) / 1e3, runs);

    /* 4. Stream-ordered allocation from the device's default pool: 100 allocations, 100
     * frees and a stream synchronize per run, as the benchmark's stream-ordered row. */
    if (pools) {
        CUstream stream;
        CUdeviceptr p[100];
        MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
        runs = 31;
        for (int i = 0; i < runs; i++) {
            t0 = now_ns();
            for (int k = 0; k < 100; k++) CHECK(cuMemAllocAsync(&p[k], 1024, stream));
            for (int k = 0; k < 100; k++) CHECK(cuMemFreeAsync(p[k], stream));
            CHECK(cuStreamSynchronize(stream));
            v[i] = (now_ns() - t0) / 100;
        }
        printf("4. cuMemAllocAsync + cuMemFreeAsync, 1 KiB, default pool: %.2f us per pair "
               "(median of %d runs of 100 allocations, 100 frees and one cuStreamSynchronize)\n",
               median(v, runs) / 1e3, runs);
        MUST(cuStreamDestroy(stream));
    } else {
        printf("4. cuMemAllocAsync: this device has no memory pools\n");
    }
    MUST(cuMemFree(keep));

    /* 5. The current-context stack (ctx is current here). */
    runs = 11;
    for (int i = 0; i < runs; i++) {
        CUcontext popped;
        t0 = now_ns();
        for (int k = 0; k < 100000; k++) {
            CHECK(cuCtxPushCurrent(ctx));
            CHECK(cuCtxPopCurrent(&popped));
        }
        v[i] = (now_ns() - t0) / 100000;
        t0 = now_ns();
        for (int k = 0; k < 100000; k++) CHECK(cuCtxGetCurrent(&current));
        w[i] = (now_ns() - t0) / 100000;
    }
    printf("5. cuCtxPushCurrent + cuCtxPopCurrent: %.1f ns per pair; cuCtxGetCurrent: %.1f ns "
           "(medians of %d runs of 100000)\n", median(v, runs), median(w, runs), runs);
    for (int i = 0; i < runs; i++) {
        t0 = now_ns();
        for (int k = 0; k < 100000; k++) CHECK(cuCtxSetCurrent(ctx));
        v[i] = (now_ns() - t0) / 100000;
    }
    printf("   cuCtxSetCurrent (the context already current): %.1f ns (median of %d runs of 100000)\n",
           median(v, runs), runs);
    MUST(cuCtxDestroy(ctx));
    return 0;
}
