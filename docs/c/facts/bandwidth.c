/* docs/driver-facts.md, "Copy bandwidth" and "Large pageable copies": how fast the
 * synchronous copies move data between host and device, by kind of host memory.
 *
 *   1. 256 MiB to and from page-locked memory (cuMemHostAlloc) and pageable memory
 *      (malloc, written once before the first copy), the same buffers every time
 *   2. 64 MiB and 256 MiB device to host into pageable memory: into the same buffer every
 *      time, into a new malloc'd buffer every time (never touched, as a new Vec with
 *      capacity), and into a new buffer written once before the copy (pre-faulted)
 *
 * Each copy is timed with CLOCK_MONOTONIC from the call until the device is idle again
 * (cuMemcpyHtoD from pageable memory returns once the data is staged, so a
 * cuCtxSynchronize follows every copy), after one untimed copy of the same kind. A new
 * buffer is allocated (and for the pre-faulted one, written) before its timing starts and
 * freed after it ends; malloc serves these sizes with fresh pages from the kernel (mmap).
 * GB/s are 10^9 bytes per second; every line is the median of the runs it names.
 *
 *   nvcc -o /tmp/bandwidth docs/c/facts/bandwidth.c -lcuda && /tmp/bandwidth
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/;
 * docs/c/facts/bandwidth.out is what it printed on the GPU machine. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MIB ((size_t)1 << 20)
#define RUNS 9
static CUdeviceptr on_device; /* 256 MiB */

enum direction { TO_DEVICE, TO_HOST };
enum host { SAME, NEW_UNTOUCHED, NEW_WRITTEN };

/* One copy of `bytes` between `host` and the device, in GB/s, until the device is idle. */
static double copy_once(enum direction d, void *host, size_t bytes) {
    double t0 = now_s();
    if (d == TO_DEVICE)
        CHECK(cuMemcpyHtoD(on_device, host, bytes));
    else
        CHECK(cuMemcpyDtoH(host, on_device, bytes));
    CHECK(cuCtxSynchronize());
    return bytes / (now_s() - t0) / 1e9;
}

/* The median GB/s of RUNS copies (after one untimed copy); `same` is the buffer of kind
 * SAME, the others are allocated for each copy. */
static double measure(enum direction d, enum host kind, void *same, size_t bytes) {
    double v[RUNS];
    for (int i = -1; i < RUNS; i++) {
        void *host = same;
        if (kind != SAME) {
            host = malloc(bytes);
            if (host == NULL) exit(2);
            if (kind == NEW_WRITTEN) memset(host, 1, bytes);
        }
        double gbps = copy_once(d, host, bytes);
        if (kind != SAME) free(host);
        if (i >= 0) v[i] = gbps;
    }
    return median(v, RUNS);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    char name[256] = "?";
    int driver = 0;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    cuDeviceGetName(name, sizeof name, dev);
    cuDriverGetVersion(&driver);
    printf("device 0: %s; driver API %d.%d\n", name, driver / 1000, driver % 1000 / 10);
    MUST(create_context(&ctx, dev));
    size_t big = 256 * MIB;
    void *pinned = NULL;
    MUST(cuMemAlloc(&on_device, big));
    MUST(cuMemsetD8(on_device, 3, big));
    MUST(cuMemHostAlloc(&pinned, big, 0));
    void *pageable = malloc(big);
    if (pageable == NULL) return 2;
    memset(pinned, 1, big);
    memset(pageable, 1, big);

    printf("1. 256 MiB, the same host buffer every time (GB/s, medians of %d copies):\n", RUNS);
    printf("   pinned:   host to device %5.1f, device to host %5.1f\n",
           measure(TO_DEVICE, SAME, pinned, big), measure(TO_HOST, SAME, pinned, big));
    printf("   pageable: host to device %5.1f, device to host %5.1f\n",
           measure(TO_DEVICE, SAME, pageable, big), measure(TO_HOST, SAME, pageable, big));

    printf("2. Device to host into pageable memory (GB/s, medians of %d copies):\n", RUNS);
    size_t sizes[] = {64 * MIB, 256 * MIB};
    for (int s = 0; s < 2; s++) {
        size_t bytes = sizes[s];
        printf("   %3zu MiB: the same buffer %5.1f, a new buffer %5.1f, a new buffer written "
               "before the copy %5.1f; pinned %5.1f\n", bytes / MIB,
               measure(TO_HOST, SAME, pageable, bytes), measure(TO_HOST, NEW_UNTOUCHED, NULL, bytes),
               measure(TO_HOST, NEW_WRITTEN, NULL, bytes), measure(TO_HOST, SAME, pinned, bytes));
    }
    printf("   and host to device from the same pageable buffer: 64 MiB %5.1f, 256 MiB %5.1f\n",
           measure(TO_DEVICE, SAME, pageable, 64 * MIB), measure(TO_DEVICE, SAME, pageable, big));

    free(pageable);
    MUST(cuMemFreeHost(pinned));
    MUST(cuMemFree(on_device));
    MUST(cuCtxDestroy(ctx));
    return 0;
}
