/* Chapter 2 of docs/guide/02-context-lifetime.md (rule 1), "Nested contexts".
 *
 * An outer context, then an inner one created while the outer is current (the inner is
 * pushed on top of it). Code written for the outer context runs while the inner is
 * current, so its memory and stream land in the inner context, and die with it.
 * The other direction is fine: the outer context's memory, used while an inner context is
 * current.
 *
 *   nvcc -o /tmp/nested_contexts docs/c/nested_contexts.c -lcuda && /tmp/nested_contexts
 *
 * docs/c/run.sh builds and runs every program here; nested_contexts.out is what this one
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

static CUcontext outer, inner, inner2;

static const char *which(CUcontext c) {
    if (c == NULL) return "none";
    if (c == outer) return "outer";
    if (c == inner) return "inner";
    if (c == inner2) return "second inner";
    return "another context";
}

static void show_current(void) {
    CUcontext current = NULL;
    cuCtxGetCurrent(&current);
    printf("  => current context: %s\n", which(current));
}

static void print_uints(const char *what, CUdeviceptr p) {
    unsigned int h[4] = {0};
    CUresult r = cuMemcpyDtoH(h, p, sizeof h);
    if (r != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r));
    else
        printf("  => %s: %u %u %u %u\n", what, h[0], h[1], h[2], h[3]);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    unsigned int data[4] = {1, 2, 3, 4};

    printf("The outer context, with a buffer of its own:\n");
    MUST(create_context(&outer, dev));
    CUdeviceptr in_outer;
    MUST(cuMemAlloc(&in_outer, sizeof data));

    printf("The inner context, created inside (pushed on top of the outer one):\n");
    MUST(create_context(&inner, dev));
    show_current();

    printf("Code written for the outer context allocates and makes a stream:\n");
    CUdeviceptr meant_for_outer;
    CUstream stream_meant_for_outer;
    CUcontext owner = NULL;
    MUST(cuMemAlloc(&meant_for_outer, sizeof data));
    CALL(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, meant_for_outer));
    printf("  => the memory belongs to: %s\n", which(owner));
    MUST(cuStreamCreate(&stream_meant_for_outer, CU_STREAM_NON_BLOCKING));
    CALL(cuStreamGetCtx(stream_meant_for_outer, &owner));
    printf("  => the stream belongs to: %s\n", which(owner));

    printf("The inner context ends:\n");
    CALL(cuCtxDestroy(inner));
    show_current();
    printf("The outer code goes on with its memory (its stream would crash: see destroyed_context.out):\n");
    CALL(cuMemcpyHtoD(meant_for_outer, data, sizeof data));

    printf("The other direction: the outer context's memory, used while a new inner context is current:\n");
    MUST(create_context(&inner2, dev));
    show_current();
    CALL(cuMemcpyHtoD(in_outer, data, sizeof data));
    print_uints("the outer buffer", in_outer);
    CALL(cuCtxDestroy(inner2));
    show_current();
    CALL(cuCtxDestroy(outer));
    return 0;
}
