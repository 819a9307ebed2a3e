/* Issue 28, pageable copies near the wire: how fast can a staged copy between the device and
 * pageable host memory go on this machine, and what limits it? Raw driver calls and
 * pthreads only (no crate).
 *
 *   0. the kernel's transparent-huge-page settings;
 *   1. host memcpy of 256 MiB with T threads (2 MiB chunks handed out in turn), into a
 *      buffer written before (warm) and into a new malloc'd buffer advised MADV_HUGEPAGE
 *      (fresh: the page faults of a new Vec);
 *   2. the driver's own paths as reference: cuMemcpyDtoH into a reused / new pageable
 *      buffer, cuMemcpyHtoD from pageable + cuCtxSynchronize, and pinned DMA;
 *   3. a staged pipeline with T worker threads kept for the whole run (started once):
 *      a staging of page-locked slots (cuMemHostRegister), the calling thread queues
 *      cuMemcpy*Async on the legacy stream with an event per slot and waits for events;
 *      the workers only memcpy between slots and the pageable range (they never call the
 *      driver). Device to host into a reused and into a new buffer, host to device; sizes
 *      1 to 256 MiB; T = 4, 8, 12.
 *
 * PROBE_COPY=nt in the environment makes the worker threads copy with non-temporal
 * (streaming) 16-byte stores and an sfence per chunk instead of memcpy (sections 1 and 3:
 * does the host copy's read-for-ownership of the destination limit the pipeline?);
 * PROBE_SECTIONS=13 runs only the sections named. docs/c/facts/staged_pipeline.nt.out is
 * the H200 run of both copies, sections 1 and 3.
 *
 * Each line is the median of 7 timed copies after one untimed one, timed with
 * CLOCK_MONOTONIC from the call until the data is complete (host to device: until the
 * legacy stream is idle). Every staged copy is checked byte for byte once per line.
 * GB/s are 10^9 bytes per second.
 *
 *   nvcc -O2 -o /tmp/staged_pipeline docs/c/facts/staged_pipeline.c -lcuda -lpthread
 *   /tmp/staged_pipeline
 *
 * docs/c/facts/staged_pipeline.out is what it printed on the GPU machine. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <emmintrin.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s failed: %d (line %d)\n", #x, (int)r_, __LINE__); exit(1); } } while (0)
#define MIB (1ul << 20)
#define SLOT (2 * MIB)
#define MAXT 16
#define MAXSLOTS 40
#define REPS 7

/* memcpy, or (PROBE_COPY=nt) loads and non-temporal 16-byte stores, 64 bytes a step, with
 * an sfence at the end so that the stores are visible before the chunk is handed on */
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
static void *(*copy)(void *, const void *, size_t) = memcpy;
static void *copy_nt_fn(void *d, const void *s, size_t n) { copy_nt(d, s, n); return d; }
static const char *sections = "1234";
#define SECTION(c) (strchr(sections, c) != NULL)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_d);
    return v[n / 2];
}

static void *fresh(size_t bytes) {
    void *p = malloc(bytes);
    if (!p) exit(2);
    /* the 2 MiB-aligned part, as the crate advises a new Vec */
    size_t lo = ((size_t)p + SLOT - 1) & ~(SLOT - 1), hi = ((size_t)p + bytes) & ~(SLOT - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    return p;
}

/* ---- a pool of worker threads, kept for the run ------------------------------------ */

enum dir { TO_HOST, FROM_HOST, PLAIN, PREFAULT };
#define MAXCHUNKS 1024
static int faulted[MAXCHUNKS];

static struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    /* the job */
    int gen, dir, nthreads_job;
    unsigned char *host, *other;
    size_t bytes, chunk, nchunks, next_claim;
    /* slots */
    int free_[MAXSLOTS], nfree;
    int ready_slot[MAXSLOTS];
    size_t ready_chunk[MAXSLOTS];
    int nready, done_workers, stop;
    size_t copied;
} P = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
static unsigned char *staging;
static int nthreads;
static pthread_t threads[MAXT];

static void chunk_of(size_t k, size_t *off, size_t *len) {
    *off = k * P.chunk;
    *len = P.bytes - *off < P.chunk ? P.bytes - *off : P.chunk;
}

static void *worker(void *arg) {
    int me = (int)(size_t)arg, seen = 0;
    pthread_mutex_lock(&P.m);
    for (;;) {
        while (P.gen == seen && !P.stop) pthread_cond_wait(&P.c, &P.m);
        if (P.stop) break;
        seen = P.gen;
        if (me >= P.nthreads_job) continue;
        for (;;) {
            size_t off, len, k;
            int slot;
            if (P.dir == TO_HOST) {
                /* a DMA-filled slot into the host range */
                while (P.nready == 0 && P.copied < P.nchunks) pthread_cond_wait(&P.c, &P.m);
                if (P.nready == 0) break;
                P.nready--;
                slot = P.ready_slot[P.nready];
                k = P.ready_chunk[P.nready];
                pthread_mutex_unlock(&P.m);
                chunk_of(k, &off, &len);
                copy(P.host + off, staging + (size_t)slot * SLOT, len);
                pthread_mutex_lock(&P.m);
                P.free_[P.nfree++] = slot;
                P.copied++;
                pthread_cond_broadcast(&P.c);
            } else if (P.dir == FROM_HOST) {
                /* a chunk of the host range into a free slot */
                while (P.nfree == 0 && P.next_claim < P.nchunks) pthread_cond_wait(&P.c, &P.m);
                if (P.next_claim >= P.nchunks) break;
                slot = P.free_[--P.nfree];
                k = P.next_claim++;
                pthread_mutex_unlock(&P.m);
                chunk_of(k, &off, &len);
                copy(staging + (size_t)slot * SLOT, P.host + off, len);
                pthread_mutex_lock(&P.m);
                P.ready_slot[P.nready] = slot;
                P.ready_chunk[P.nready] = k;
                P.nready++;
                pthread_cond_broadcast(&P.c);
            } else if (P.dir == PREFAULT) {
                /* touch every 4 KiB page of a chunk (a write of zero: the range is about to
                 * be overwritten), so that the kernel maps it on this thread */
                if (P.next_claim >= P.nchunks) break;
                k = P.next_claim++;
                pthread_mutex_unlock(&P.m);
                chunk_of(k, &off, &len);
                for (size_t i = 0; i < len; i += 4096) ((volatile unsigned char *)P.host)[off + i] = 0;
                pthread_mutex_lock(&P.m);
                faulted[k] = 1;
                pthread_cond_broadcast(&P.c);
            } else {
                /* plain memcpy between two host ranges */
                if (P.next_claim >= P.nchunks) break;
                k = P.next_claim++;
                pthread_mutex_unlock(&P.m);
                chunk_of(k, &off, &len);
                copy(P.host + off, P.other + off, len);
                pthread_mutex_lock(&P.m);
                P.copied++;
            }
        }
        P.done_workers++;
        pthread_cond_broadcast(&P.c);
    }
    pthread_mutex_unlock(&P.m);
    return NULL;
}

static void start_job(int dir, int t, unsigned char *host, unsigned char *other, size_t bytes,
                      size_t chunk, int slots) {
    pthread_mutex_lock(&P.m);
    P.dir = dir; P.nthreads_job = t; P.host = host; P.other = other; P.bytes = bytes;
    P.chunk = chunk; P.nchunks = (bytes + chunk - 1) / chunk; P.next_claim = 0;
    P.nfree = 0;
    for (int i = 0; i < slots; i++) P.free_[P.nfree++] = i;
    P.nready = 0; P.done_workers = 0; P.copied = 0;
    P.gen++;
    pthread_cond_broadcast(&P.c);
    pthread_mutex_unlock(&P.m);
}

static void wait_workers(int t) {
    pthread_mutex_lock(&P.m);
    while (P.done_workers < t) pthread_cond_wait(&P.c, &P.m);
    pthread_mutex_unlock(&P.m);
}

static CUevent ev[MAXSLOTS];

/* Device to host: the calling thread queues a DMA into every free slot (an event after
 * each), waits for the oldest, hands it to the workers. */
static void staged_dtoh(unsigned char *host, CUdeviceptr dev, size_t bytes, int t, size_t chunk) {
    int slots = 2 * t + 2 > MAXSLOTS ? MAXSLOTS : 2 * t + 2;
    start_job(TO_HOST, t, host, NULL, bytes, chunk, slots);
    int fifo[MAXSLOTS];
    size_t fifo_k[MAXSLOTS];
    int head = 0, n = 0;
    size_t next = 0, nchunks = P.nchunks;
    while (next < nchunks || n > 0) {
        pthread_mutex_lock(&P.m);
        while (next < nchunks && P.nfree == 0 && n == 0) pthread_cond_wait(&P.c, &P.m);
        int take[MAXSLOTS], nt = 0;
        while (next + nt < nchunks && P.nfree > 0 && nt + n < MAXSLOTS) take[nt++] = P.free_[--P.nfree];
        pthread_mutex_unlock(&P.m);
        for (int i = 0; i < nt; i++, next++) {
            size_t off = next * chunk, len = bytes - off < chunk ? bytes - off : chunk;
            CK(cuMemcpyDtoHAsync(staging + (size_t)take[i] * SLOT, dev + off, len, NULL));
            CK(cuEventRecord(ev[take[i]], NULL));
            fifo[(head + n) % MAXSLOTS] = take[i];
            fifo_k[(head + n) % MAXSLOTS] = next;
            n++;
        }
        if (n > 0) {
            int s = fifo[head];
            size_t k = fifo_k[head];
            CK(cuEventSynchronize(ev[s]));
            head = (head + 1) % MAXSLOTS;
            n--;
            pthread_mutex_lock(&P.m);
            P.ready_slot[P.nready] = s;
            P.ready_chunk[P.nready] = k;
            P.nready++;
            pthread_cond_broadcast(&P.c);
            pthread_mutex_unlock(&P.m);
        }
    }
    wait_workers(t);
}

/* Host to device: workers fill free slots; the calling thread queues a DMA from each
 * filled slot (an event after each) and frees a slot when its event completes. */
static void staged_htod(CUdeviceptr dev, unsigned char *host, size_t bytes, int t, size_t chunk) {
    int slots = 2 * t + 2 > MAXSLOTS ? MAXSLOTS : 2 * t + 2;
    start_job(FROM_HOST, t, host, NULL, bytes, chunk, slots);
    int fifo[MAXSLOTS];
    int head = 0, n = 0;
    size_t sent = 0, nchunks = P.nchunks;
    while (sent < nchunks) {
        pthread_mutex_lock(&P.m);
        while (P.nready == 0 && n == 0) pthread_cond_wait(&P.c, &P.m);
        int take[MAXSLOTS];
        size_t take_k[MAXSLOTS];
        int nt = 0;
        while (P.nready > 0) { P.nready--; take[nt] = P.ready_slot[P.nready]; take_k[nt++] = P.ready_chunk[P.nready]; }
        pthread_mutex_unlock(&P.m);
        for (int i = 0; i < nt; i++, sent++) {
            size_t off = take_k[i] * chunk, len = bytes - off < chunk ? bytes - off : chunk;
            CK(cuMemcpyHtoDAsync(dev + off, staging + (size_t)take[i] * SLOT, len, NULL));
            CK(cuEventRecord(ev[take[i]], NULL));
            fifo[(head + n) % MAXSLOTS] = take[i];
            n++;
        }
        if (nt == 0 && n > 0) {
            int s = fifo[head];
            CK(cuEventSynchronize(ev[s]));
            head = (head + 1) % MAXSLOTS;
            n--;
            pthread_mutex_lock(&P.m);
            P.free_[P.nfree++] = s;
            pthread_cond_broadcast(&P.c);
            pthread_mutex_unlock(&P.m);
        }
    }
    wait_workers(t);
    CK(cuStreamSynchronize(NULL));
}

static void plain_memcpy(unsigned char *dst, unsigned char *src, size_t bytes, int t) {
    start_job(PLAIN, t, dst, src, bytes, SLOT, 0);
    wait_workers(t);
}

/* Device to host straight into the host range: workers fault its pages in (when `fault`),
 * the calling thread registers it piece by piece (`piece` bytes, page-aligned inside the
 * range) as the pieces are mapped, queues a DMA into each, then waits and unregisters. */
static void direct_dtoh(unsigned char *host, CUdeviceptr dev, size_t bytes, int t, size_t piece,
                        int fault, double *reg_s, double *unreg_s) {
    /* piece boundaries at multiples of `piece` in the address space (page-aligned), so
     * that no two registrations share a page */
    size_t base = (size_t)host / piece * piece, end = (size_t)host + bytes;
    size_t npieces = (end - base + piece - 1) / piece;
    if (fault) {
        for (size_t k = 0; k < (bytes + SLOT - 1) / SLOT; k++) faulted[k] = 0;
        start_job(PREFAULT, t, host, NULL, bytes, SLOT, 0);
    }
    double r = 0;
    for (size_t p = 0; p < npieces; p++) {
        size_t lo = base + p * piece < (size_t)host ? (size_t)host : base + p * piece;
        size_t hi = base + (p + 1) * piece > end ? end : base + (p + 1) * piece;
        size_t off = lo - (size_t)host, len = hi - lo;
        if (fault) {
            size_t last = (off + len - 1) / SLOT;
            pthread_mutex_lock(&P.m);
            for (size_t k = off / SLOT; k <= last; k++)
                while (!faulted[k]) pthread_cond_wait(&P.c, &P.m);
            pthread_mutex_unlock(&P.m);
        }
        double t0 = now_s();
        CK(cuMemHostRegister(host + off, len, 0));
        r += now_s() - t0;
        CK(cuMemcpyDtoHAsync(host + off, dev + off, len, NULL));
    }
    CK(cuStreamSynchronize(NULL));
    double t0 = now_s();
    for (size_t p = 0; p < npieces; p++) {
        size_t lo = base + p * piece < (size_t)host ? (size_t)host : base + p * piece;
        CK(cuMemHostUnregister((void *)lo));
    }
    *reg_s = r;
    *unreg_s = now_s() - t0;
    if (fault) wait_workers(t);
}

static size_t chunk_for(size_t bytes, int t) {
    size_t c = 64 << 10;
    while (c < SLOT && c * 2 * t < bytes) c *= 2;
    return c;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *pc = getenv("PROBE_COPY"), *ps = getenv("PROBE_SECTIONS");
    if (pc && !strcmp(pc, "nt")) copy = copy_nt_fn;
    if (ps) sections = ps;
    printf("copy: %s, sections %s\n", copy == memcpy ? "memcpy" : "non-temporal stores", sections);
    char buf[256];
    for (int i = 0; i < 2; i++) {
        const char *f = i ? "/sys/kernel/mm/transparent_hugepage/defrag"
                          : "/sys/kernel/mm/transparent_hugepage/enabled";
        FILE *fp = fopen(f, "r");
        if (fp && fgets(buf, sizeof buf, fp)) printf("0. %s: %s", f, buf);
        if (fp) fclose(fp);
    }
    CUdevice d;
    CUcontext ctx;
    char name[128];
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDeviceGetName(name, sizeof name, d));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    printf("device: %s\n", name);
    const size_t big = 256 * MIB;
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, big));
    unsigned char *pattern = malloc(big), *warm = malloc(big), *pinned;
    for (size_t i = 0; i < big; i++) pattern[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(warm, 1, big);
    CK(cuMemcpyHtoD(dev, pattern, big));
    CK(cuMemHostAlloc((void **)&pinned, big, 0));
    if (posix_memalign((void **)&staging, SLOT, MAXSLOTS * SLOT)) exit(2);
    madvise(staging, MAXSLOTS * SLOT, MADV_HUGEPAGE);
    memset(staging, 0, MAXSLOTS * SLOT);
    CK(cuMemHostRegister(staging, MAXSLOTS * SLOT, 0));
    for (int i = 0; i < MAXSLOTS; i++) CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    nthreads = MAXT - 1;
    for (int i = 0; i < nthreads; i++) pthread_create(&threads[i], NULL, worker, (void *)(size_t)i);

    double v[REPS], t0;
    int ts[] = {1, 2, 4, 8, 12, 15};
    if (SECTION('1')) printf("1. host memcpy of 256 MiB by T threads (2 MiB chunks), GB/s:\n");
    for (int i = 0; i < 6 && SECTION('1'); i++) {
        int t = ts[i];
        plain_memcpy(warm, pattern, big, t);
        for (int r = 0; r < REPS; r++) { t0 = now_s(); plain_memcpy(warm, pattern, big, t); v[r] = now_s() - t0; }
        double w = big / median(v, REPS) / 1e9;
        for (int r = 0; r < REPS; r++) {
            unsigned char *f = fresh(big);
            t0 = now_s(); plain_memcpy(f, pattern, big, t); v[r] = now_s() - t0;
            free(f);
        }
        printf("   T=%2d: into a warm buffer %5.1f, into a new buffer %5.1f\n", t, w, big / median(v, REPS) / 1e9);
    }

    size_t sizes[] = {1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB};
    if (SECTION('2')) printf("2. the driver's paths (GB/s):\n");
    for (int i = 0; i < 5 && SECTION('2'); i++) {
        size_t b = sizes[i];
        double a[4];
        CK(cuMemcpyDtoH(warm, dev, b));
        for (int r = 0; r < REPS; r++) { t0 = now_s(); CK(cuMemcpyDtoH(warm, dev, b)); v[r] = now_s() - t0; }
        a[0] = b / median(v, REPS) / 1e9;
        for (int r = 0; r < REPS; r++) {
            unsigned char *f = fresh(b);
            t0 = now_s(); CK(cuMemcpyDtoH(f, dev, b)); v[r] = now_s() - t0;
            free(f);
        }
        a[1] = b / median(v, REPS) / 1e9;
        for (int r = 0; r < REPS; r++) { t0 = now_s(); CK(cuMemcpyHtoD(dev, warm, b)); CK(cuCtxSynchronize()); v[r] = now_s() - t0; }
        a[2] = b / median(v, REPS) / 1e9;
        for (int r = 0; r < REPS; r++) { t0 = now_s(); CK(cuMemcpyDtoH(pinned, dev, b)); v[r] = now_s() - t0; }
        a[3] = b / median(v, REPS) / 1e9;
        printf("   %3zu MiB: DtoH reused %5.1f, DtoH new %5.1f, HtoD %5.1f, DtoH pinned %5.1f\n", b / MIB, a[0], a[1], a[2], a[3]);
    }
    CK(cuMemcpyHtoD(dev, pattern, big));

    if (SECTION('3')) printf("3. staged with kept threads, async DMA + an event per slot (GB/s; chunk):\n");
    int tt[] = {8, 12};
    for (int j = 0; j < 2 && SECTION('3'); j++) {
        int t = tt[j];
        for (int i = 0; i < 5; i++) {
            size_t b = sizes[i], c = chunk_for(b, t);
            double a[3];
            /* to a reused buffer, checked once */
            memset(warm, 0, b);
            staged_dtoh(warm, dev, b, t, c);
            if (memcmp(warm, pattern, b)) { printf("   WRONG DtoH T=%d %zu\n", t, b); exit(3); }
            for (int r = 0; r < REPS; r++) { t0 = now_s(); staged_dtoh(warm, dev, b, t, c); v[r] = now_s() - t0; }
            a[0] = b / median(v, REPS) / 1e9;
            for (int r = 0; r < REPS; r++) {
                unsigned char *f = fresh(b);
                t0 = now_s(); staged_dtoh(f, dev, b, t, c); v[r] = now_s() - t0;
                if (r == 0 && memcmp(f, pattern, b)) { printf("   WRONG new T=%d\n", t); exit(3); }
                free(f);
            }
            a[1] = b / median(v, REPS) / 1e9;
            staged_htod(dev, pattern, b, t, c);
            for (int r = 0; r < REPS; r++) { t0 = now_s(); staged_htod(dev, pattern, b, t, c); v[r] = now_s() - t0; }
            a[2] = b / median(v, REPS) / 1e9;
            CK(cuMemcpyDtoH(warm, dev, b));
            if (memcmp(warm, pattern, b)) { printf("   WRONG HtoD T=%d %zu\n", t, b); exit(3); }
            printf("   T=%2d %3zu MiB (chunk %4zu KiB): DtoH reused %5.1f, DtoH new %5.1f, HtoD %5.1f\n",
                   t, b / MIB, c >> 10, a[0], a[1], a[2]);
        }
    }
    if (SECTION('4')) {
        printf("4. straight into the range: page faults by T threads, cuMemHostRegister per piece, DMA, unregister\n");
        double reg, unreg, regs[REPS], unregs[REPS];
        for (int i = 0; i < 6; i++) {
            int t = ts[i];
            for (int r = 0; r < REPS; r++) {
                unsigned char *f = fresh(big);
                start_job(PREFAULT, t, f, NULL, big, SLOT, 0);
                t0 = now_s(); wait_workers(t); v[r] = now_s() - t0;
                free(f);
            }
            printf("   faulting a new 256 MiB buffer in, T=%2d: %5.1f GB/s\n", t, big / median(v, REPS) / 1e9);
        }
        size_t pieces[] = {2 * MIB, 8 * MIB, 32 * MIB, 256 * MIB};
        for (int i = 0; i < 4; i++) {
            for (int r = 0; r < REPS; r++) {
                t0 = now_s();
                /* the 2 MiB-aligned 254 MiB inside the buffer */
                unsigned char *a0 = (unsigned char *)(((size_t)warm + SLOT - 1) & ~(SLOT - 1));
                size_t span = big - SLOT, pc = pieces[i] > span ? span : pieces[i];
                for (size_t o = 0; o < span; o += pc) CK(cuMemHostRegister(a0 + o, pc, 0));
                regs[r] = now_s() - t0;
                t0 = now_s();
                for (size_t o = 0; o < span; o += pc) CK(cuMemHostUnregister(a0 + o));
                unregs[r] = now_s() - t0;
            }
            printf("   register / unregister 254 MiB of a warm buffer in pieces of %3zu MiB: %7.0f / %7.0f us\n",
                   pieces[i] / MIB, median(regs, REPS) * 1e6, median(unregs, REPS) * 1e6);
        }
        size_t dsz[] = {16 * MIB, 64 * MIB, 256 * MIB};
        int dts[] = {8, 15};
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < 3; i++)
                for (int pi = 1; pi < 3; pi++) {
                    size_t b = dsz[i], pc = pieces[pi];
                    double a[2];
                    for (int r = 0; r < REPS; r++) {
                        unsigned char *f = fresh(b);
                        t0 = now_s(); direct_dtoh(f, dev, b, dts[j], pc, 1, &reg, &unreg); v[r] = now_s() - t0;
                        regs[r] = reg; unregs[r] = unreg;
                        if (r == 0 && memcmp(f, pattern, b)) { printf("   WRONG direct\n"); exit(3); }
                        free(f);
                    }
                    a[0] = b / median(v, REPS) / 1e9;
                    double rg = median(regs, REPS), ur = median(unregs, REPS);
                    for (int r = 0; r < REPS; r++) {
                        t0 = now_s(); direct_dtoh(warm, dev, b, dts[j], pc, 0, &reg, &unreg); v[r] = now_s() - t0;
                    }
                    a[1] = b / median(v, REPS) / 1e9;
                    printf("   T=%2d %3zu MiB, pieces of %2zu MiB: new %5.1f GB/s (register %5.0f us, unregister %5.0f us), reused %5.1f GB/s\n",
                           dts[j], b / MIB, pc / MIB, a[0], rg * 1e6, ur * 1e6, a[1]);
                }
    }
    pthread_mutex_lock(&P.m);
    P.stop = 1;
    pthread_cond_broadcast(&P.c);
    pthread_mutex_unlock(&P.m);
    for (int i = 0; i < nthreads; i++) pthread_join(threads[i], NULL);
    CK(cuMemHostUnregister(staging));
    free(staging);
    free(pattern);
    free(warm);
    CK(cuMemFreeHost(pinned));
    CK(cuMemFree(dev));
    CK(cuDevicePrimaryCtxRelease(d));
    printf("done\n");
    return 0;
}
