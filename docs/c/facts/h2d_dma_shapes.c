/* Issue 28, the 64 MiB staged upload: what rate does the copy engine reach from page-locked
 * memory into the device, by the shape of the DMAs, and does host memory traffic slow it?
 * Raw driver calls and pthreads only (no crate).
 *
 * 64 MiB from a page-locked buffer (cuMemHostAlloc, and a malloc'd buffer registered with
 * cuMemHostRegister, as the crate's staging is) to the device:
 *   1. one DMA; DMAs of 2 MiB (the crate's chunk), 8 MiB (a run of four slots) on the
 *      legacy stream, an event after each as the crate records; 2 MiB DMAs alternating
 *      between the legacy stream and a second, non-blocking stream;
 *   2. the same 2 MiB and 8 MiB shapes while T threads memcpy between two other 256 MiB
 *      host buffers without pause (host memory traffic as the crate's kept threads make it:
 *      the copy threads read the `Vec` and write the staging while the DMA reads it).
 *
 * Each line is the median of 9 timed copies after one untimed one, from the first call
 * until the last event (or the streams) completed, timed with CLOCK_MONOTONIC. GB/s are
 * 10^9 bytes per second.
 *
 *   nvcc -O2 -o /tmp/h2d_dma_shapes docs/c/facts/h2d_dma_shapes.c -lcuda -lpthread
 *   /tmp/h2d_dma_shapes
 *
 * docs/c/facts/h2d_dma_shapes.out is what it printed on the GPU machine. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)
#define MIB (1ul << 20)
#define BYTES (64 * MIB)
#define REPS 9
#define MAXT 16

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static CUevent ev[64];
static CUstream second;

/* 64 MiB from `host` in DMAs of `piece` bytes, an event after each; `streams` 1: the legacy
 * stream, 2: alternating with `second`. Returns seconds. */
static double upload(CUdeviceptr dev, unsigned char *host, size_t piece, int streams) {
    double t0 = now_s();
    size_t n = BYTES / piece;
    for (size_t i = 0; i < n; i++) {
        CUstream s = (streams == 2 && (i & 1)) ? second : NULL;
        CK(cuMemcpyHtoDAsync(dev + i * piece, host + i * piece, piece, s));
        CK(cuEventRecord(ev[i % 64], s));
    }
    CK(cuStreamSynchronize(NULL));
    if (streams == 2) CK(cuStreamSynchronize(second));
    return now_s() - t0;
}

static double rate(CUdeviceptr dev, unsigned char *host, size_t piece, int streams) {
    double v[REPS];
    upload(dev, host, piece, streams);
    for (int r = 0; r < REPS; r++) v[r] = upload(dev, host, piece, streams);
    qsort(v, REPS, sizeof *v, cmp_d);
    return BYTES / v[REPS / 2] / 1e9;
}

/* host memory traffic: threads memcpy 2 MiB blocks between two 256 MiB buffers */
static volatile int stop_traffic;
static unsigned char *ta, *tb;
static void *traffic(void *arg) {
    size_t me = (size_t)arg, k = me * 7;
    while (!stop_traffic) {
        size_t off = (k++ % 128) * 2 * MIB;
        memcpy(ta + off, tb + off, 2 * MIB);
    }
    return NULL;
}

static void shapes(const char *what, CUdeviceptr dev, unsigned char *host) {
    printf("   %-34s one DMA %5.1f | 2 MiB %5.1f | 8 MiB %5.1f | 2 MiB, two streams %5.1f\n",
           what, rate(dev, host, BYTES, 1), rate(dev, host, 2 * MIB, 1),
           rate(dev, host, 8 * MIB, 1), rate(dev, host, 2 * MIB, 2));
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUdevice d;
    CUcontext ctx;
    char name[128];
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDeviceGetName(name, sizeof name, d));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("device: %s; %ld cores\n", name, cores);
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, BYTES));
    CK(cuStreamCreate(&second, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 64; i++) CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    unsigned char *alloc, *reg;
    CK(cuMemHostAlloc((void **)&alloc, BYTES, 0));
    memset(alloc, 3, BYTES);
    if (posix_memalign((void **)&reg, 2 * MIB, BYTES)) exit(2);
    madvise(reg, BYTES, MADV_HUGEPAGE);
    memset(reg, 5, BYTES);
    CK(cuMemHostRegister(reg, BYTES, 0));
    ta = malloc(256 * MIB);
    tb = malloc(256 * MIB);
    memset(ta, 1, 256 * MIB);
    memset(tb, 2, 256 * MIB);

    printf("1. 64 MiB host to device, GB/s (medians of %d):\n", REPS);
    shapes("cuMemHostAlloc, quiet host:", dev, alloc);
    shapes("cuMemHostRegister, quiet host:", dev, reg);
    printf("2. the same while T threads memcpy between two other host buffers:\n");
    int ts[] = {4, 8, 15};
    for (int i = 0; i < 3; i++) {
        int t = ts[i] < cores ? ts[i] : (int)cores - 1;
        pthread_t th[MAXT];
        stop_traffic = 0;
        for (int j = 0; j < t; j++) pthread_create(&th[j], NULL, traffic, (void *)(size_t)j);
        char what[64];
        snprintf(what, sizeof what, "registered, T=%2d threads copying:", t);
        shapes(what, dev, reg);
        stop_traffic = 1;
        for (int j = 0; j < t; j++) pthread_join(th[j], NULL);
    }
    CK(cuMemHostUnregister(reg));
    CK(cuMemFreeHost(alloc));
    CK(cuMemFree(dev));
    printf("done\n");
    return 0;
}
