/* Chapter 4 of docs/guide/04-threads.md (rule 3): threads.
 *
 * The stack of current contexts belongs to a thread. The main thread creates a context
 * (current there); a second thread starts with no context current, tries to allocate,
 * copy and synchronize, then pushes the context, works, and pops it again.
 *
 *   nvcc -o /tmp/thread_no_context docs/c/thread_no_context.c -lcuda -lpthread
 *   /tmp/thread_no_context
 *
 * docs/c/run.sh builds and runs every program here; thread_no_context.out is what this one
 * printed on the GPU machine. */
#include <cuda.h>
#include <pthread.h>
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

static CUcontext ctx;
static CUstream stream;
static CUdeviceptr buffer;

static void show_current(void) {
    CUcontext current = NULL;
    cuCtxGetCurrent(&current);
    printf("  => current context on this thread: %s\n",
           current == NULL ? "none" : current == ctx ? "the context" : "another context");
}

static void *worker(void *arg) {
    (void)arg;
    printf("On a second thread, which never made the context current:\n");
    show_current();
    CUdeviceptr p;
    CALL(cuMemAlloc(&p, 1024));
    unsigned int data[4] = {1, 2, 3, 4};
    CALL(cuMemcpyHtoD(buffer, data, sizeof data));
    CALL(cuStreamSynchronize(stream));

    printf("The same thread pushes the context, works, and pops it:\n");
    CALL(cuCtxPushCurrent(ctx));
    show_current();
    if (CALL(cuMemAlloc(&p, 1024)) == CUDA_SUCCESS) CALL(cuMemFree(p));
    CALL(cuMemcpyHtoD(buffer, data, sizeof data));
    CUcontext popped = NULL;
    CALL(cuCtxPopCurrent(&popped));
    show_current();
    return NULL;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    printf("On the main thread: a context (current here), a stream and a buffer:\n");
    MUST(create_context(&ctx, dev));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAlloc(&buffer, 1024));
    show_current();

    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL) != 0) {
        printf("pthread_create failed\n");
        return 2;
    }
    pthread_join(thread, NULL);

    printf("Back on the main thread:\n");
    show_current();
    CALL(cuCtxDestroy(ctx));
    return 0;
}
