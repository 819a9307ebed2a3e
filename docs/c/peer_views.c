/* Chapter 7 of docs/guide/07-devices.md (rule 6): several devices, peer access and peer views.
 *
 * Two devices, a context on each. Context 0 owns a buffer on device 0; context 1 (device
 * 1) has a module, a stream and the kernel `scale`. Three steps, each in a child process
 * of its own (this program started again with the step's name), because a kernel that
 * faults leaves a sticky error that ends the process's CUDA use (sticky_error.out):
 *
 *   no-peer-access  device 1's kernel is given device 0's buffer; peer access was never
 *                   enabled
 *   peer-access     the same launch after cuCtxEnablePeerAccess (context 1 may access
 *                   context 0's memory), where cuDeviceCanAccessPeer says it can be
 *   copy-peer       cuMemcpyPeer from device 1's memory into device 0's buffer, peer
 *                   access never enabled
 *
 * The parent only counts the devices, starts the children and reports how each ended.
 *
 *   nvcc -o /tmp/peer_views docs/c/peer_views.c -lcuda && /tmp/peer_views kernels/kernels.ptx
 *
 * It needs two GPUs: with fewer it says so and exits 3, and docs/c/run.sh does not run it
 * (so it writes no peer_views.out). No output is committed yet: this repository's GPU
 * machine has one GPU. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Reads four floats of `p` in context `ctx` (pushed for the copy) and prints them. */
static void print_floats(const char *what, CUcontext ctx, CUdeviceptr p) {
    float h[4] = {0};
    CUcontext popped;
    CUresult r = cuCtxPushCurrent(ctx);
    if (r == CUDA_SUCCESS) {
        r = cuMemcpyDtoH(h, p, sizeof h);
        cuCtxPopCurrent(&popped);
    }
    if (r != CUDA_SUCCESS)
        printf("  => %s: cannot read back (%s)\n", what, err_name(r));
    else
        printf("  => %s: %g %g %g %g\n", what, h[0], h[1], h[2], h[3]);
}

static const char *steps[] = {"no-peer-access", "peer-access", "copy-peer", NULL};

static int run_step(const char *ptx, const char *step) {
    CUdevice dev0, dev1;
    CUcontext ctx0, ctx1;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev0, 0));
    MUST(cuDeviceGet(&dev1, 1));
    int can = 0;
    MUST(cuDeviceCanAccessPeer(&can, dev1, dev0));
    printf("  => device 1 can be given access to device 0's memory: %s\n", can ? "yes" : "no");

    printf("Context 0 on device 0, and a buffer of it holding 1.0 four times:\n");
    MUST(create_context(&ctx0, dev0));
    CUdeviceptr on_device0;
    MUST(cuMemAlloc(&on_device0, 4 * sizeof(float)));
    MUST(cuMemsetD32(on_device0, 0x3f800000u /* 1.0f */, 4));
    int ordinal = -1;
    MUST(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, on_device0));
    printf("  => the buffer is on device %d\n", ordinal);

    printf("Context 1 on device 1 (now current), with its own module and stream:\n");
    MUST(create_context(&ctx1, dev1));
    CUmodule module_of_1;
    CUfunction scale_of_1;
    CUstream stream_of_1;
    MUST(cuModuleLoad(&module_of_1, ptx));
    MUST(cuModuleGetFunction(&scale_of_1, module_of_1, "scale"));
    MUST(cuStreamCreate(&stream_of_1, CU_STREAM_NON_BLOCKING));
    size_t n = 4;
    float k = 7.0f;
    void *params[] = {&on_device0, &n, &k};

    if (strcmp(step, "no-peer-access") == 0) {
        printf("Device 1's kernel `scale(x, 4, 7.0)` given device 0's buffer, no peer access:\n");
        CALL(cuLaunchKernel(scale_of_1, 1, 1, 1, 32, 1, 1, 0, stream_of_1, params, NULL));
        CALL(cuStreamSynchronize(stream_of_1));
        print_floats("device 0's buffer", ctx0, on_device0);
    } else if (strcmp(step, "peer-access") == 0) {
        printf("Context 1 is given access to context 0's memory, then the same launch:\n");
        CALL(cuCtxEnablePeerAccess(ctx0, 0));
        CALL(cuLaunchKernel(scale_of_1, 1, 1, 1, 32, 1, 1, 0, stream_of_1, params, NULL));
        CALL(cuStreamSynchronize(stream_of_1));
        print_floats("device 0's buffer", ctx0, on_device0);
    } else if (strcmp(step, "copy-peer") == 0) {
        printf("A copy from device 1's memory into device 0's buffer, no peer access:\n");
        CUdeviceptr on_device1;
        MUST(cuMemAlloc(&on_device1, 4 * sizeof(float)));
        MUST(cuMemsetD32(on_device1, 0x40000000u /* 2.0f */, 4));
        CALL(cuMemcpyPeer(on_device0, ctx0, on_device1, ctx1, 4 * sizeof(float)));
        print_floats("device 0's buffer", ctx0, on_device0);
    }
    CALL(cuCtxDestroy(ctx1));
    CALL(cuCtxDestroy(ctx0));
    printf("  (the step returned normally)\n");
    return 0;
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels/kernels.ptx";
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc > 2) return run_step(ptx, argv[2]);
    int count = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 2) {
        printf("needs two GPUs: found %d\n", count);
        return 3;
    }
    printf("%d devices\n", count);
    for (int i = 0; steps[i] != NULL; i++) {
        printf("--- step %s, in a child process\n", steps[i]);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], ptx, steps[i], (char *)NULL);
            perror("execl");
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status))
            printf("  => the child was killed by signal %d (%s)\n", WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            printf("  => the child exited with status %d\n", WEXITSTATUS(status));
    }
    return 0;
}
