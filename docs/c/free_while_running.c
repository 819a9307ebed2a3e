/* Chapter 5 of docs/guide/05a-stream-scopes.md (rule 4): freeing memory that queued work still uses.
 *
 * A stream gets about 0.5 s of kernel work (`spin`), then a kernel that doubles every
 * element of a buffer (`scale`). While both are still queued, the host frees the buffer.
 * Does the free wait for the kernel? Then the host allocates again (the driver may hand
 * out the same address) and fills the new buffer with 5: does the queued kernel double
 * the new buffer?
 *
 *   1. memory from cuMemAlloc, freed with cuMemFree
 *   2. memory from cuMemAllocAsync (stream-ordered), freed with cuMemFree
 *   3. memory from cuMemAllocAsync, freed with cuMemFreeAsync on the same stream
 *
 *   nvcc -o /tmp/free_while_running docs/c/free_while_running.c -lcuda
 *   /tmp/free_while_running kernels/kernels.ptx [no-realloc]
 *
 * With `no-realloc`, freed memory is not allocated again (for compute-sanitizer, which can
 * only report an access to memory that is not allocated at the time of the access).
 *
 * docs/c/run.sh builds and runs every program here; free_while_running.out is what this
 * one printed on the GPU machine, and free_while_running.sanitizer.out what
 * compute-sanitizer reported for it. */
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

#define N (1u << 20) /* elements of 4 bytes */
static long long spin_cycles = 850000000; /* about 0.5 s at the H100's 1.7 GHz */

static CUfunction spin, scale;
static CUstream stream, other_stream;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Queues about 0.5 s of work, then `scale(x, N, 2.0)`. */
static void queue_work_on(CUdeviceptr x) {
    size_t n = N;
    float k = 2.0f;
    void *spin_params[] = {&spin_cycles};
    void *scale_params[] = {&x, &n, &k};
    MUST(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, spin_params, NULL));
    MUST(cuLaunchKernel(scale, N / 256, 1, 1, 256, 1, 1, 0, stream, scale_params, NULL));
}

static void print_ends(const char *what, CUdeviceptr p) {
    float first = 0, last = 0;
    CUresult r1 = cuMemcpyDtoH(&first, p, 4);
    CUresult r2 = cuMemcpyDtoH(&last, p + (size_t)(N - 1) * 4, 4);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r1 != CUDA_SUCCESS ? r1 : r2));
    else
        printf("  => %s: first element %g, last element %g\n", what, first, last);
}

/* Frees `buffer` while the stream still has work that uses it queued, then, unless
 * `realloc_after_free` is 0, allocates again the same way and fills the new buffer with 5. */
static void free_while_queued(CUdeviceptr buffer, int stream_ordered, int realloc_after_free) {
    queue_work_on(buffer);
    CALL(cuStreamQuery(stream));
    double t0 = now_ms();
    CUresult r = cuMemFree(buffer);
    printf("  cuMemFree(buffer) -> %s, returned after %.1f ms\n", err_name(r), now_ms() - t0);
    CALL(cuStreamQuery(stream));
    if (realloc_after_free) {
        printf("  Allocate again and fill with 5:\n");
        CUdeviceptr again;
        if (stream_ordered) {
            MUST(cuMemAllocAsync(&again, N * 4, other_stream));
            MUST(cuMemsetD32Async(again, 0x40a00000u /* 5.0f */, N, other_stream));
            MUST(cuStreamSynchronize(other_stream));
        } else {
            MUST(cuMemAlloc(&again, N * 4));
            MUST(cuMemsetD32(again, 0x40a00000u /* 5.0f */, N));
        }
        printf("  => the new buffer %s the freed buffer's address\n", again == buffer ? "has" : "does not have");
        CALL(cuStreamSynchronize(stream));
        print_ends("the new buffer (5 = untouched, 10 = doubled by the queued kernel)", again);
        CALL(cuMemFree(again));
    } else {
        CALL(cuStreamSynchronize(stream));
    }
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    int realloc_after_free = !(argc > 2 && strcmp(argv[2], "no-realloc") == 0);
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&spin, module, "spin"));
    MUST(cuModuleGetFunction(&scale, module, "scale"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamCreate(&other_stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr buffer;

    printf("1. Memory from cuMemAlloc, freed with cuMemFree while queued work uses it:\n");
    MUST(cuMemAlloc(&buffer, N * 4));
    MUST(cuMemsetD32(buffer, 0x3f800000u /* 1.0f */, N));
    MUST(cuCtxSynchronize());
    free_while_queued(buffer, 0, realloc_after_free);

    printf("2. Memory from cuMemAllocAsync, freed with cuMemFree while queued work uses it:\n");
    MUST(cuMemAllocAsync(&buffer, N * 4, stream));
    MUST(cuMemsetD32Async(buffer, 0x3f800000u /* 1.0f */, N, stream));
    MUST(cuStreamSynchronize(stream));
    free_while_queued(buffer, 1, realloc_after_free);

    printf("3. Memory from cuMemAllocAsync, freed with cuMemFreeAsync on the same stream:\n");
    MUST(cuMemAllocAsync(&buffer, N * 4, stream));
    MUST(cuMemsetD32Async(buffer, 0x3f800000u /* 1.0f */, N, stream));
    MUST(cuStreamSynchronize(stream));
    queue_work_on(buffer);
    double t0 = now_ms();
    CUresult r = cuMemFreeAsync(buffer, stream);
    printf("  cuMemFreeAsync(buffer, stream) -> %s, returned after %.1f ms\n", err_name(r), now_ms() - t0);
    CALL(cuStreamQuery(stream));
    CALL(cuStreamSynchronize(stream));

    CALL(cuCtxDestroy(ctx));
    return 0;
}
