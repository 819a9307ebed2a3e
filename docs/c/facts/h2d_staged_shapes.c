/* Issue 28, `copy_from_host` of 64 MiB: which shape of a staged upload reaches the copy
 * engine's speed? Raw driver calls and pthreads only (no crate).
 *
 * A staging of N slots of S bytes, page-locked with cuMemHostRegister; T worker threads,
 * kept and spinning between copies (the best case for the start), each claims the next
 * chunk k of the source (a warm, pageable 64 MiB buffer), waits until slot k % N is free,
 * copies the chunk into it (memcpy, or `nt`: non-temporal 16-byte stores and an sfence),
 * and marks it ready. The calling thread queues each ready chunk in order as
 * cuMemcpyHtoDAsync on the legacy stream (with R > 1: up to R ready chunks whose slots
 * follow each other as one DMA), records an event after each DMA, and frees the slots of
 * a DMA once cuEventQuery finds its event complete; it only spins, never copies.
 *
 * Each line: the median of 9 timed copies after two untimed ones, from the start until the
 * legacy stream is idle, checked once byte for byte. GB/s are 10^9 bytes per second.
 *
 *   nvcc -O2 -o /tmp/h2d_staged_shapes docs/c/facts/h2d_staged_shapes.c -lcuda -lpthread
 *   /tmp/h2d_staged_shapes
 *
 * docs/c/facts/h2d_staged_shapes.out is what it printed on the GPU machine. */
#define _GNU_SOURCE
#include <cuda.h>
#include <emmintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)
#define KIB (1ul << 10)
#define MIB (1ul << 20)
#define BYTES (64 * MIB)
#define STAGING_MAX (64 * MIB)
#define MAXT 16
#define MAXCHUNKS 1024
#define REPS 9

static void copy_nt(void *dst, const void *src, size_t n) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (16 - ((size_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head; s += head; n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    memcpy(d, s, n);
    _mm_sfence();
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the job, published by `gen` */
static _Atomic int gen, stop;
static int job_threads, job_nt;
static size_t job_slot, job_nslots, job_nchunks;
static const unsigned char *job_src;
static unsigned char *staging;
static _Atomic size_t next_claim, freed; /* chunks below `freed` have left their slots */
static _Atomic int ready[MAXCHUNKS];
static _Atomic int done_workers;

static void *worker(void *arg) {
    int me = (int)(size_t)arg, seen = 0;
    for (;;) {
        while (atomic_load(&gen) == seen && !atomic_load(&stop)) _mm_pause();
        if (atomic_load(&stop)) return NULL;
        seen = atomic_load(&gen);
        if (me < job_threads) {
            for (;;) {
                size_t k = atomic_fetch_add(&next_claim, 1);
                if (k >= job_nchunks) break;
                while (k >= atomic_load(&freed) + job_nslots) _mm_pause();
                size_t off = k * job_slot, len = BYTES - off < job_slot ? BYTES - off : job_slot;
                unsigned char *dst = staging + (k % job_nslots) * job_slot;
                if (job_nt) copy_nt(dst, job_src + off, len);
                else memcpy(dst, job_src + off, len);
                atomic_store(&ready[k], 1);
            }
        }
        atomic_fetch_add(&done_workers, 1);
    }
}

static int nthreads_started;

static double upload(CUdeviceptr dev, const unsigned char *src, size_t slot, size_t nslots, int t,
                     int nt, int run) {
    static CUevent ev[MAXCHUNKS];
    static int made;
    if (!made) {
        for (int i = 0; i < MAXCHUNKS; i++) CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
        made = 1;
    }
    size_t nchunks = (BYTES + slot - 1) / slot;
    for (size_t k = 0; k < nchunks; k++) atomic_store(&ready[k], 0);
    job_threads = t; job_nt = nt; job_slot = slot; job_nslots = nslots; job_nchunks = nchunks;
    job_src = src;
    atomic_store(&next_claim, 0);
    atomic_store(&freed, 0);
    atomic_store(&done_workers, 0);
    double t0 = now_s();
    atomic_fetch_add(&gen, 1);
    /* runs in flight: first chunk and count */
    size_t fifo_k[MAXCHUNKS], fifo_n[MAXCHUNKS], head = 0, tail = 0, sent = 0;
    while (atomic_load(&freed) < nchunks) {
        if (sent < nchunks && atomic_load(&ready[sent])) {
            size_t n = 1;
            while (n < (size_t)run && sent + n < nchunks && atomic_load(&ready[sent + n]) &&
                   (sent + n) % nslots != 0)
                n++;
            size_t off = sent * slot, end = (sent + n) * slot > BYTES ? BYTES : (sent + n) * slot;
            CK(cuMemcpyHtoDAsync(dev + off, staging + (sent % nslots) * slot, end - off, NULL));
            CK(cuEventRecord(ev[tail], NULL));
            fifo_k[tail] = sent; fifo_n[tail] = n; tail++;
            sent += n;
        } else if (head < tail) {
            CUresult r = cuEventQuery(ev[head]);
            if (r == CUDA_SUCCESS) {
                atomic_store(&freed, fifo_k[head] + fifo_n[head]);
                head++;
            } else if (r != CUDA_ERROR_NOT_READY) {
                CK(r);
            }
        }
    }
    CK(cuStreamSynchronize(NULL));
    double dt = now_s() - t0;
    while (atomic_load(&done_workers) < nthreads_started) _mm_pause();
    return dt;
}

static double median_of(CUdeviceptr dev, const unsigned char *src, size_t slot, size_t nslots,
                        int t, int nt, int run, unsigned char *check) {
    double v[REPS];
    for (int i = 0; i < 2; i++) upload(dev, src, slot, nslots, t, nt, run);
    for (int i = 0; i < REPS; i++) v[i] = upload(dev, src, slot, nslots, t, nt, run);
    CK(cuMemcpyDtoH(check, dev, BYTES));
    if (memcmp(check, src, BYTES) != 0) {
        fprintf(stderr, "wrong bytes (slot %zu, slots %zu, T=%d)\n", slot, nslots, t);
        exit(3);
    }
    memset(check, 0, BYTES);
    CK(cuMemsetD8(dev, 0, BYTES));
    qsort(v, REPS, sizeof *v, cmp_d);
    return BYTES / v[REPS / 2] / 1e9;
}

int main(void) {
    CUdevice d;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    setvbuf(stdout, NULL, _IOLBF, 0);
    char name[128];
    CK(cuDeviceGetName(name, sizeof name, d));
    printf("device: %s; %ld cores\n", name, sysconf(_SC_NPROCESSORS_ONLN));
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, BYTES));
    unsigned char *src = malloc(BYTES), *check = malloc(BYTES);
    for (size_t i = 0; i < BYTES; i++) src[i] = (unsigned char)(i * 7 + (i >> 20));
    memset(check, 0, BYTES);
    if (posix_memalign((void **)&staging, 2 * MIB, STAGING_MAX)) return 2;
    memset(staging, 0, STAGING_MAX);
    CK(cuMemHostRegister(staging, STAGING_MAX, 0));

    nthreads_started = 12;
    pthread_t th[MAXT];
    for (int i = 0; i < nthreads_started; i++) pthread_create(&th[i], NULL, worker, (void *)(size_t)i);

    /* the reference: one DMA of 64 MiB from the staging, and the driver's pageable path */
    {
        double v[REPS];
        for (int i = 0; i < REPS; i++) {
            double t0 = now_s();
            CK(cuMemcpyHtoDAsync(dev, staging, BYTES, NULL));
            CK(cuStreamSynchronize(NULL));
            v[i] = now_s() - t0;
        }
        qsort(v, REPS, sizeof *v, cmp_d);
        printf("one 64 MiB DMA from the page-locked staging: %.1f GB/s\n", BYTES / v[REPS / 2] / 1e9);
        for (int i = 0; i < REPS; i++) {
            double t0 = now_s();
            CK(cuMemcpyHtoD(dev, src, BYTES));
            v[i] = now_s() - t0;
        }
        qsort(v, REPS, sizeof *v, cmp_d);
        printf("cuMemcpyHtoD from the pageable source: %.1f GB/s\n", BYTES / v[REPS / 2] / 1e9);
    }

    printf("64 MiB staged uploads, GB/s (S: slot bytes, N: slots, R: most slots per DMA):\n");
    size_t slots_kib[] = {256, 512, 1024, 2048};
    size_t counts[] = {4, 8, 16, 32};
    int ts[] = {4, 8, 12};
    for (int nt = 0; nt < 2; nt++) {
        for (size_t si = 0; si < sizeof slots_kib / sizeof *slots_kib; si++) {
            size_t slot = slots_kib[si] * KIB;
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
                size_t n = counts[ci];
                if (slot * n > STAGING_MAX || slot * n < 2 * MIB) continue;
                printf("  %-6s S=%4zu KiB N=%2zu (%2zu MiB):", nt ? "nt" : "memcpy", slots_kib[si], n,
                       slot * n / MIB);
                for (size_t ti = 0; ti < sizeof ts / sizeof *ts; ti++) {
                    printf("  T=%2d %5.1f", ts[ti], median_of(dev, src, slot, n, ts[ti], nt, 1, check));
                }
                if (slot <= 2 * MIB)
                    printf("  | T=8 R=4 %5.1f", median_of(dev, src, slot, n, 8, nt, 4, check));
                printf("\n");
                fflush(stdout);
            }
        }
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads_started; i++) pthread_join(th[i], NULL);
    CK(cuMemHostUnregister(staging));
    CK(cuMemFree(dev));
    CK(cuDevicePrimaryCtxRelease(d));
    printf("done\n");
    return 0;
}
