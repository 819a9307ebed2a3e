/* Issue 28: can a sync stream's bounce ring stay registered (cuMemHostRegister) until
 * the crate destroys its context, and what do unregistering and destroying cost while
 * ANOTHER context keeps the GPU busy? Raw driver calls only (no crate).
 *
 * Context B (cuCtxCreate) gets ~1 s of memsets of a 1 GiB buffer on a non-blocking
 * stream, queued and not waited for, before each timed call ("busy"); the same calls are
 * timed with the GPU idle. Context A (cuCtxCreate, idle itself) registers 1 MiB of
 * aligned_alloc memory. Timed:
 *   unregister   cuMemHostUnregister in A
 *   destroy+reg  cuCtxDestroy(A) with the 1 MiB still registered
 *   destroy      cuCtxDestroy(A) with nothing registered
 * After "destroy+reg", a new context C registers the same range again: CUDA_SUCCESS
 * means the destroy took the registration away (else 712, already registered).
 *
 *   nvcc -o /tmp/register_until_destroy docs/c/facts/register_until_destroy.c -lcuda
 *   /tmp/register_until_destroy
 *
 * docs/c/facts/register_until_destroy.out is what it printed on the session's GPU. */
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

static CUresult make_ctx(CUcontext *ctx, CUdevice dev) {
#if CUDA_VERSION >= 13000
    return cuCtxCreate(ctx, NULL, 0, dev);
#else
    return cuCtxCreate(ctx, 0, dev);
#endif
}

static CUdevice dev;
static CUcontext b;
static CUstream s;
static CUdeviceptr big;
static size_t big_n = (size_t)1 << 30;
static int reps = 0;

/* Queues about 1 s of memsets on B's stream (calibrated once), leaves A current. */
static void make_busy(int busy, CUcontext a) {
    if (!busy) return;
    CK(cuCtxPushCurrent(b));
    for (int i = 0; i < reps; i++) CK(cuMemsetD8Async(big, (unsigned char)i, big_n, s));
    CK(cuCtxPopCurrent(NULL));
    if (a) CK(cuCtxSetCurrent(a));
}

static const char *left(void) {
    CK(cuCtxPushCurrent(b));
    CUresult q = cuStreamQuery(s);
    CK(cuStreamSynchronize(s));
    CK(cuCtxPopCurrent(NULL));
    return q == CUDA_ERROR_NOT_READY ? "yes" : "no";
}

static void round_(int busy) {
    const char *when = busy ? "busy" : "idle";
    void *m = aligned_alloc(4096, 1 << 20);
    CUcontext a;

    CK(make_ctx(&a, dev));
    CK(cuMemHostRegister(m, 1 << 20, 0));
    make_busy(busy, a);
    double t = now_us();
    CK(cuMemHostUnregister(m));
    double u = now_us() - t;
    printf("%-4s unregister    %10.1f us  (B's memsets still queued after: %s)\n", when, u, left());
    CK(cuCtxDestroy(a));

    CK(make_ctx(&a, dev));
    CK(cuMemHostRegister(m, 1 << 20, 0));
    make_busy(busy, a);
    t = now_us();
    CK(cuCtxDestroy(a));
    u = now_us() - t;
    printf("%-4s destroy+reg   %10.1f us  (B's memsets still queued after: %s)\n", when, u, left());
    CUcontext c;
    CK(make_ctx(&c, dev));
    CUresult again = cuMemHostRegister(m, 1 << 20, 0);
    printf("%-4s the same range registered again in a new context: %d%s\n", when, (int)again,
           again == CUDA_SUCCESS ? " (CUDA_SUCCESS: the destroy took the registration away)" : "");
    if (again == CUDA_SUCCESS) CK(cuMemHostUnregister(m));
    CK(cuCtxDestroy(c));

    CK(make_ctx(&a, dev));
    make_busy(busy, a);
    t = now_us();
    CK(cuCtxDestroy(a));
    u = now_us() - t;
    printf("%-4s destroy       %10.1f us  (B's memsets still queued after: %s)\n", when, u, left());
    free(m);
}

int main(void) {
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(make_ctx(&b, dev));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&big, big_n));
    /* calibrate: memsets of 1 GiB for about 1 s */
    CK(cuMemsetD8Async(big, 0, big_n, s));
    CK(cuStreamSynchronize(s));
    double t = now_us();
    for (int i = 0; i < 8; i++) CK(cuMemsetD8Async(big, (unsigned char)i, big_n, s));
    CK(cuStreamSynchronize(s));
    double per = (now_us() - t) / 8;
    reps = (int)(1e6 / per) + 1;
    printf("one 1 GiB memset: %.1f us; %d queued per busy call\n", per, reps);
    CK(cuCtxPopCurrent(NULL));
    round_(0);
    round_(1);
    round_(0);
    round_(1);
    return 0;
}
