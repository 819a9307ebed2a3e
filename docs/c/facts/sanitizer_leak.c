/* docs/driver-facts.md, "compute-sanitizer": what its leak check reports for device memory
 * that was never freed but whose context was destroyed (the destroy reclaims it, as
 * `with_context` reclaims a buffer leaked with `mem::forget`), and what it prints for a
 * program that makes no CUDA call at all (a test binary whose tests all skip).
 *
 *   nvcc -o /tmp/sanitizer_leak docs/c/facts/sanitizer_leak.c -lcuda
 *   compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 /tmp/sanitizer_leak
 *   compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 /tmp/sanitizer_leak no-cuda-call
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/, and runs it under
 * compute-sanitizer both ways: docs/c/facts/sanitizer_leak.sanitizer.out and
 * docs/c/facts/sanitizer_leak.no-cuda-call.sanitizer.out are what it reported on the GPU
 * machine. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "no-cuda-call") == 0) {
            printf("No CUDA call in this run.\n");
            return 0;
        }
    }
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr never_freed;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    printf("4096 bytes of device memory, never freed; then the context is destroyed:\n");
    MUST(cuMemAlloc(&never_freed, 4096));
    CALL(cuCtxDestroy(ctx));
    return 0;
}
