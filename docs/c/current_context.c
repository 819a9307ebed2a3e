/* Chapter 1 of docs/guide/01-contexts.md: what a context is, and what is current on a thread.
 *
 * Most driver calls name no context: they use the one on top of the calling thread's
 * stack of current contexts. This program allocates "for A" while B is current, and
 * destroys the context that is current.
 *
 *   nvcc -o /tmp/current_context docs/c/current_context.c -lcuda && /tmp/current_context
 *
 * docs/c/run.sh builds and runs every program here; current_context.out is what this one
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

static CUcontext A, B;

static const char *which(CUcontext c) {
    if (c == NULL) return "none";
    if (c == A) return "A";
    if (c == B) return "B";
    return "another context";
}

static void show_current(void) {
    CUcontext current = NULL;
    cuCtxGetCurrent(&current);
    printf("  => current context: %s\n", which(current));
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));

    printf("Creating a context pushes it on this thread's stack: it becomes current.\n");
    MUST(create_context(&A, dev));
    show_current();
    MUST(create_context(&B, dev));
    show_current();

    printf("Allocate memory meant for A. The call names no context, so it uses the current one.\n");
    CUdeviceptr meant_for_a;
    MUST(cuMemAlloc(&meant_for_a, 1024));
    CUcontext owner = NULL;
    CALL(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, meant_for_a));
    printf("  => the memory belongs to: %s\n", which(owner));

    printf("Pop B: A is current again, and the memory is still B's.\n");
    CUcontext popped = NULL;
    CALL(cuCtxPopCurrent(&popped));
    printf("  => popped: %s\n", which(popped));
    show_current();

    printf("Destroy B. Its memory goes with it, so a copy meant for A's memory fails.\n");
    CALL(cuCtxDestroy(B));
    unsigned int data[4] = {1, 2, 3, 4};
    CALL(cuMemcpyHtoD(meant_for_a, data, sizeof data));

    printf("Destroy A while it is current.\n");
    CALL(cuCtxDestroy(A));
    show_current();
    printf("Allocate with no context current:\n");
    CUdeviceptr p;
    CALL(cuMemAlloc(&p, 1024));
    return 0;
}
