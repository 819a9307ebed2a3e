/* Issue 28: what a "synchronous" device write costs by each way the crate could complete
 * it, measured with raw driver calls only (no crate).
 *
 * Part A, one thread, one created context, a 4-byte device buffer and a pageable host word:
 *   A1 cuMemcpyHtoD + cuMemcpyDtoH (the raw pair: the upload is not known complete)
 *   A2 cuMemcpyHtoD + cuEventRecord(ev, legacy stream) + cuMemcpyDtoH
 *   A3 cuMemcpyHtoD + cuStreamSynchronize(legacy) + cuMemcpyDtoH
 *   A4 on a non-blocking stream S: cuMemcpyHtoDAsync + cuEventRecord(ev, S) + cuMemcpyDtoHAsync
 *   A5 on S: cuMemcpyHtoDAsync + cuMemcpyDtoHAsync + cuStreamSynchronize(S) (cudarc's pair)
 *   A6 on S: cuMemcpyHtoDAsync + cuMemcpyDtoHAsync
 *   A7 cuPointerGetAttributes (context, device ordinal, memory type, is-managed)
 *   A8 cuEventRecord on the idle legacy stream; A9 on idle S
 *   A10 cuStreamWaitEvent(S2, ev) with ev's record complete
 *   A11 a "scope" after the write: cuMemcpyHtoD + record(legacy) + cuStreamWaitEvent(S2) +
 *       cuMemsetD32Async(S2) + cuStreamSynchronize(S2)
 *   A12 the same with cuStreamSynchronize(legacy) instead of the record and the wait
 *   A13 the same with the write on S (async) and its record waited for by S2
 *   A14 the synchronous calls of the per-thread default stream (the `_ptds` entry points,
 *       what cuda.h names with CUDA_API_PER_THREAD_DEFAULT_STREAM): cuMemcpyHtoD_v2_ptds +
 *       cuEventRecord(ev, CU_STREAM_PER_THREAD) + cuMemcpyDtoH_v2_ptds
 *   A15 cuMemcpyHtoD_v2_ptds + cuMemcpyDtoH_v2_ptds
 *   A16 A11 with the write and its record on the per-thread default stream
 * Part B, 16 threads on one context, each its own 16 KiB buffer and pageable source; per
 * iteration an upload and a memset of the buffer, completed four ways:
 *   B1 legacy stream, cuStreamSynchronize(legacy) after each write
 *   B2 legacy stream, cuEventRecord(thread's event, legacy) after each write
 *   B3 the thread's non-blocking stream, async calls, cuEventRecord on it after each write
 *   B4 the thread's non-blocking stream, async calls, cuStreamSynchronize on it after each
 *   B5 the per-thread default stream's synchronous calls (_ptds), cuEventRecord on it after each
 *   B6 B5, and a 1 KiB cuMemAllocAsync + cuMemFreeAsync on the legacy stream per step
 *   B7 B5, and the same allocation and free on the per-thread default stream
 * Every line gives the median of 7 runs; a run is a loop of calls divided by their number.
 *
 *   nvcc -o /tmp/sync_write_paths docs/c/facts/sync_write_paths.c -lcuda -lpthread
 *   /tmp/sync_write_paths
 *
 * docs/c/facts/sync_write_paths.out is what it printed on the GPU machine. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *err_name(CUresult r) {
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}
#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    printf("  %s -> %s (line %d)\n", #call, err_name(r_), __LINE__); exit(2); } } while (0)

/* The per-thread default stream's synchronous entry points (exported by libcuda since
 * CUDA 7; cuda.h declares them only under CUDA_API_PER_THREAD_DEFAULT_STREAM). */
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t bytes);
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t bytes);
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n);

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static CUcontext ctx;
static CUdeviceptr small;
static CUstream s, s2;
static CUevent ev, ev_s;
static volatile unsigned host_word = 7, back_word;

#define ITERS 2000
#define RUNS 7

static double median_of(void (*step)(void)) {
    double runs[RUNS];
    for (int w = 0; w < 200; w++) step();
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < ITERS; i++) step();
        CHECK(cuCtxSynchronize());
        runs[r] = (now_ns() - t0) / ITERS;
    }
    qsort(runs, RUNS, sizeof runs[0], by_value);
    return runs[RUNS / 2];
}

static void a1(void) {
    CHECK(cuMemcpyHtoD(small, (const void *)&host_word, 4));
    CHECK(cuMemcpyDtoH((void *)&back_word, small, 4));
}
static void a2(void) {
    CHECK(cuMemcpyHtoD(small, (const void *)&host_word, 4));
    CHECK(cuEventRecord(ev, NULL));
    CHECK(cuMemcpyDtoH((void *)&back_word, small, 4));
}
static void a3(void) {
    CHECK(cuMemcpyHtoD(small, (const void *)&host_word, 4));
    CHECK(cuStreamSynchronize(NULL));
    CHECK(cuMemcpyDtoH((void *)&back_word, small, 4));
}
static void a4(void) {
    CHECK(cuMemcpyHtoDAsync(small, (const void *)&host_word, 4, s));
    CHECK(cuEventRecord(ev_s, s));
    CHECK(cuMemcpyDtoHAsync((void *)&back_word, small, 4, s));
}
static void a5(void) {
    CHECK(cuMemcpyHtoDAsync(small, (const void *)&host_word, 4, s));
    CHECK(cuMemcpyDtoHAsync((void *)&back_word, small, 4, s));
    CHECK(cuStreamSynchronize(s));
}
static void a6(void) {
    CHECK(cuMemcpyHtoDAsync(small, (const void *)&host_word, 4, s));
    CHECK(cuMemcpyDtoHAsync((void *)&back_word, small, 4, s));
}
static void a7(void) {
    CUpointer_attribute attrs[4] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED};
    CUcontext c = NULL;
    int ordinal = 0;
    CUmemorytype mt = 0;
    int managed = 0;
    void *data[4] = {&c, &ordinal, &mt, &managed};
    CHECK(cuPointerGetAttributes(4, attrs, data, small));
}
static void a8(void) { CHECK(cuEventRecord(ev, NULL)); }
static void a9(void) { CHECK(cuEventRecord(ev_s, s)); }
static void a10(void) { CHECK(cuStreamWaitEvent(s2, ev, 0)); }
static void a11(void) {
    CHECK(cuMemcpyHtoD(small, (const void *)&host_word, 4));
    CHECK(cuEventRecord(ev, NULL));
    CHECK(cuStreamWaitEvent(s2, ev, 0));
    CHECK(cuMemsetD32Async(small, 1, 1, s2));
    CHECK(cuStreamSynchronize(s2));
}
static void a12(void) {
    CHECK(cuMemcpyHtoD(small, (const void *)&host_word, 4));
    CHECK(cuStreamSynchronize(NULL));
    CHECK(cuMemsetD32Async(small, 1, 1, s2));
    CHECK(cuStreamSynchronize(s2));
}
static void a13(void) {
    CHECK(cuMemcpyHtoDAsync(small, (const void *)&host_word, 4, s));
    CHECK(cuEventRecord(ev_s, s));
    CHECK(cuStreamWaitEvent(s2, ev_s, 0));
    CHECK(cuMemsetD32Async(small, 1, 1, s2));
    CHECK(cuStreamSynchronize(s2));
}

static void a14(void) {
    CHECK(cuMemcpyHtoD_v2_ptds(small, (const void *)&host_word, 4));
    CHECK(cuEventRecord(ev, CU_STREAM_PER_THREAD));
    CHECK(cuMemcpyDtoH_v2_ptds((void *)&back_word, small, 4));
}
static void a15(void) {
    CHECK(cuMemcpyHtoD_v2_ptds(small, (const void *)&host_word, 4));
    CHECK(cuMemcpyDtoH_v2_ptds((void *)&back_word, small, 4));
}
static void a16(void) {
    CHECK(cuMemcpyHtoD_v2_ptds(small, (const void *)&host_word, 4));
    CHECK(cuEventRecord(ev, CU_STREAM_PER_THREAD));
    CHECK(cuStreamWaitEvent(s2, ev, 0));
    CHECK(cuMemsetD32Async(small, 1, 1, s2));
    CHECK(cuStreamSynchronize(s2));
}

/* ---- part B ---------------------------------------------------------------------------- */
#define THREADS 16
#define B_ITERS 2000
#define B_BYTES (16 * 1024)
static int mode;
static pthread_barrier_t start;

static void *worker(void *arg) {
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    CUdeviceptr buf;
    CUstream own;
    CUevent done;
    char *src = malloc(B_BYTES);
    memset(src, 1, B_BYTES);
    CHECK(cuMemAlloc(&buf, B_BYTES));
    CHECK(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    pthread_barrier_wait(&start);
    for (int i = 0; i < B_ITERS; i++) {
        switch (mode) {
        case 1:
            CHECK(cuMemcpyHtoD(buf, src, B_BYTES));
            CHECK(cuStreamSynchronize(NULL));
            CHECK(cuMemsetD32(buf, 0, B_BYTES / 4));
            CHECK(cuStreamSynchronize(NULL));
            break;
        case 2:
            CHECK(cuMemcpyHtoD(buf, src, B_BYTES));
            CHECK(cuEventRecord(done, NULL));
            CHECK(cuMemsetD32(buf, 0, B_BYTES / 4));
            CHECK(cuEventRecord(done, NULL));
            break;
        case 3:
            CHECK(cuMemcpyHtoDAsync(buf, src, B_BYTES, own));
            CHECK(cuEventRecord(done, own));
            CHECK(cuMemsetD32Async(buf, 0, B_BYTES / 4, own));
            CHECK(cuEventRecord(done, own));
            break;
        case 5:
        case 6:
        case 7: {
            CHECK(cuMemcpyHtoD_v2_ptds(buf, src, B_BYTES));
            CHECK(cuEventRecord(done, CU_STREAM_PER_THREAD));
            CHECK(cuMemsetD32_v2_ptds(buf, 0, B_BYTES / 4));
            CHECK(cuEventRecord(done, CU_STREAM_PER_THREAD));
            if (mode != 5) {
                CUstream on = mode == 6 ? NULL : CU_STREAM_PER_THREAD;
                CUdeviceptr tmp;
                CHECK(cuMemAllocAsync(&tmp, 1024, on));
                CHECK(cuMemFreeAsync(tmp, on));
            }
            break;
        }
        default:
            CHECK(cuMemcpyHtoDAsync(buf, src, B_BYTES, own));
            CHECK(cuStreamSynchronize(own));
            CHECK(cuMemsetD32Async(buf, 0, B_BYTES / 4, own));
            CHECK(cuStreamSynchronize(own));
            break;
        }
    }
    CHECK(cuCtxSynchronize());
    CHECK(cuEventDestroy(done));
    CHECK(cuStreamDestroy(own));
    CHECK(cuMemFree(buf));
    free(src);
    return NULL;
}

static double part_b(int m) {
    double runs[3];
    for (int r = 0; r < 3; r++) {
        pthread_t t[THREADS];
        mode = m;
        pthread_barrier_init(&start, NULL, THREADS + 1);
        for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, NULL);
        pthread_barrier_wait(&start);
        double t0 = now_ns();
        for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
        runs[r] = THREADS * (double)B_ITERS / ((now_ns() - t0) / 1e9);
        pthread_barrier_destroy(&start);
    }
    qsort(runs, 3, sizeof runs[0], by_value);
    return runs[1];
}

int main(void) {
    CUdevice dev;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
#else
    CHECK(cuCtxCreate(&ctx, 0, dev));
#endif
    CHECK(cuMemAlloc(&small, 4));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&ev_s, CU_EVENT_DISABLE_TIMING));
    printf("part A: one thread, ns per step, median of %d runs of %d steps\n", RUNS, ITERS);
    printf("  A1  HtoD + DtoH (legacy)                          %8.0f\n", median_of(a1));
    printf("  A2  HtoD + record(legacy) + DtoH                  %8.0f\n", median_of(a2));
    printf("  A3  HtoD + sync(legacy) + DtoH                    %8.0f\n", median_of(a3));
    printf("  A4  S: HtoDAsync + record(S) + DtoHAsync          %8.0f\n", median_of(a4));
    printf("  A5  S: HtoDAsync + DtoHAsync + sync(S)            %8.0f\n", median_of(a5));
    printf("  A6  S: HtoDAsync + DtoHAsync                      %8.0f\n", median_of(a6));
    printf("  A7  cuPointerGetAttributes (4 attributes)         %8.0f\n", median_of(a7));
    printf("  A8  cuEventRecord, idle legacy stream             %8.0f\n", median_of(a8));
    printf("  A9  cuEventRecord, idle non-blocking stream       %8.0f\n", median_of(a9));
    printf("  A10 cuStreamWaitEvent, record complete            %8.0f\n", median_of(a10));
    printf("  A11 HtoD + record + S2 waits + memset(S2) + sync  %8.0f\n", median_of(a11));
    printf("  A12 HtoD + sync(legacy) + memset(S2) + sync       %8.0f\n", median_of(a12));
    printf("  A13 S: HtoDAsync + record; S2 waits + memset+sync %8.0f\n", median_of(a13));
    printf("  A14 ptds: HtoD + record(per-thread) + DtoH        %8.0f\n", median_of(a14));
    printf("  A15 ptds: HtoD + DtoH                             %8.0f\n", median_of(a15));
    printf("  A16 ptds HtoD + record + S2 waits + memset + sync %8.0f\n", median_of(a16));
    printf("part B: %d threads on one context, 16 KiB upload + memset per step, steps/s (all threads), median of 3\n", THREADS);
    printf("  B1  legacy stream, sync after each write          %8.0f\n", part_b(1));
    printf("  B2  legacy stream, record after each write        %8.0f\n", part_b(2));
    printf("  B3  own stream, async, record after each write    %8.0f\n", part_b(3));
    printf("  B4  own stream, async, sync after each write      %8.0f\n", part_b(4));
    printf("  B5  per-thread stream, sync calls, record         %8.0f\n", part_b(5));
    printf("  B6  B5 + pool alloc/free on the legacy stream     %8.0f\n", part_b(6));
    printf("  B7  B5 + pool alloc/free on the per-thread stream %8.0f\n", part_b(7));
    CHECK(cuCtxDestroy(ctx));
    return 0;
}
