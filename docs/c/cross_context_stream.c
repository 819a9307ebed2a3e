/* Chapter 3 of docs/guide/03-one-context.md (rule 2): streams, events and kernels of another context.
 *
 * Context A has a module, a stream, an event and a buffer; context B (current) has a
 * stream. A's function is launched on B's stream, A's event is recorded on B's stream,
 * B's stream waits for A's event, and a copy into A's buffer is queued on B's stream.
 * For comparison, A's function on A's own stream while B is current.
 *
 *   nvcc -o /tmp/cross_context_stream docs/c/cross_context_stream.c -lcuda
 *   /tmp/cross_context_stream kernels/kernels.ptx
 *
 * docs/c/run.sh builds and runs every program here; cross_context_stream.out is what this
 * one printed on the GPU machine. */
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

static void print_floats(const char *what, CUdeviceptr p) {
    float h[4] = {0};
    CUresult r = cuMemcpyDtoH(h, p, sizeof h);
    if (r != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r));
    else
        printf("  => %s: %g %g %g %g\n", what, h[0], h[1], h[2], h[3]);
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));

    printf("Context A: module, function `scale`, stream, event, and a buffer holding 1.0:\n");
    CUcontext A, B;
    CUmodule module_of_a;
    CUfunction scale_of_a;
    CUstream stream_of_a;
    CUevent event_of_a;
    CUdeviceptr in_a;
    MUST(create_context(&A, dev));
    MUST(cuModuleLoad(&module_of_a, ptx));
    MUST(cuModuleGetFunction(&scale_of_a, module_of_a, "scale"));
    MUST(cuStreamCreate(&stream_of_a, CU_STREAM_NON_BLOCKING));
    MUST(cuEventCreate(&event_of_a, CU_EVENT_DEFAULT));
    MUST(cuMemAlloc(&in_a, 4 * sizeof(float)));
    MUST(cuMemsetD32(in_a, 0x3f800000u /* 1.0f */, 4));

    printf("Context B (now current) and its stream:\n");
    CUstream stream_of_b;
    MUST(create_context(&B, dev));
    MUST(cuStreamCreate(&stream_of_b, CU_STREAM_NON_BLOCKING));

    size_t n = 4;
    float k = 7.0f;
    void *params[] = {&in_a, &n, &k};

    printf("A's function launched on B's stream:\n");
    CALL(cuLaunchKernel(scale_of_a, 1, 1, 1, 32, 1, 1, 0, stream_of_b, params, NULL));
    CALL(cuStreamSynchronize(stream_of_b));
    print_floats("A's buffer", in_a);

    printf("For comparison, A's function on A's own stream, B still current:\n");
    CALL(cuLaunchKernel(scale_of_a, 1, 1, 1, 32, 1, 1, 0, stream_of_a, params, NULL));
    CALL(cuStreamSynchronize(stream_of_a));
    print_floats("A's buffer", in_a);

    printf("A's event recorded on B's stream:\n");
    CALL(cuEventRecord(event_of_a, stream_of_b));

    printf("B's stream waits for A's event (recorded on A's stream):\n");
    CALL(cuEventRecord(event_of_a, stream_of_a));
    CALL(cuStreamWaitEvent(stream_of_b, event_of_a, 0));
    CALL(cuStreamSynchronize(stream_of_b));

    printf("A copy into A's buffer, queued on B's stream:\n");
    float twos[4] = {2.0f, 2.0f, 2.0f, 2.0f};
    CALL(cuMemcpyHtoDAsync(in_a, twos, sizeof twos, stream_of_b));
    CALL(cuStreamSynchronize(stream_of_b));
    print_floats("A's buffer", in_a);

    CALL(cuCtxDestroy(B));
    CALL(cuCtxDestroy(A));
    return 0;
}
