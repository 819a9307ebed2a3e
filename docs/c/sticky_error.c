/* Chapter 6 of docs/guide/06-kernels.md (rule 5): what stays unsafe. A kernel that writes through a wild
 * pointer (`write_wild`): the launch succeeds, the fault shows up later, and it is
 * sticky: every later call in the context fails, until the context is destroyed.
 *
 *   nvcc -o /tmp/sticky_error docs/c/sticky_error.c -lcuda && /tmp/sticky_error kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs every program here; sticky_error.out is what this one
 * printed on the GPU machine. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

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
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    CUcontext ctx, fresh;
    CUmodule module;
    CUfunction write_wild;
    CUstream stream, another_stream;
    CUdeviceptr buffer, p;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(create_context(&ctx, dev));
    MUST(cuModuleLoad(&module, ptx));
    MUST(cuModuleGetFunction(&write_wild, module, "write_wild"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buffer, 1024));

    printf("Launch a kernel that writes to address 0x10:\n");
    size_t n = 1;
    void *params[] = {&buffer, &n};
    CALL(cuLaunchKernel(write_wild, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    CALL(cuStreamSynchronize(stream));

    printf("Every later call in the context reports the same error:\n");
    unsigned int data[4] = {1, 2, 3, 4};
    CALL(cuMemAlloc(&p, 1024));
    CALL(cuMemcpyHtoD(buffer, data, sizeof data));
    CALL(cuStreamCreate(&another_stream, CU_STREAM_NON_BLOCKING));
    CALL(cuCtxSynchronize());

    printf("Destroying the context ends it; does a new context work?\n");
    CALL(cuCtxDestroy(ctx));
    CALL(create_context(&fresh, dev));
    if (CALL(cuMemAlloc(&p, 1024)) == CUDA_SUCCESS) {
        CALL(cuMemcpyHtoD(p, data, sizeof data));
        CALL(cuMemFree(p));
    }
    CALL(cuCtxDestroy(fresh));
    return 0;
}
