/* Which completion callbacks the driver still runs after a kernel of their stream faults:
 * a stream callback (cuStreamAddCallback, whose callback receives a CUresult) and a host
 * function (cuLaunchHostFunc, which receives none). Awaited work (src/owned/pending/)
 * needs a wake that also comes after a fault.
 *
 *   1. A kernel spins about 100 ms and traps; behind it on the same non-blocking stream,
 *      queued before the fault: a stream callback, then a host function. After 3 s: which
 *      ran, and the status the callback received.
 *   2. After the fault is known (cuStreamQuery reports it): what cuStreamAddCallback and
 *      cuLaunchHostFunc return.
 *
 *   nvcc -o /tmp/callback_after_fault docs/c/facts/callback_after_fault.c -lcuda
 *   /tmp/callback_after_fault
 *
 * docs/c/run.sh builds and runs it with the programs of docs/c/;
 * docs/c/facts/callback_after_fault.out is what it printed on the GPU machine. */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *err_name(CUresult r) {
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "(unknown CUresult)";
}

#define MUST(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) { \
    printf("%s -> %s\n", #call, err_name(r_)); exit(2); } } while (0)

static const char PTX[] =
    ".version 7.4\n.target sm_52\n.address_size 64\n"
    ".visible .entry spin_then_trap(.param .u64 cycles) {\n"
    "  .reg .u64 %r<4>; .reg .pred %p;\n"
    "  ld.param.u64 %r1, [cycles];\n"
    "  mov.u64 %r2, %clock64;\n"
    "LOOP:\n"
    "  mov.u64 %r3, %clock64;\n"
    "  sub.u64 %r3, %r3, %r2;\n"
    "  setp.lt.u64 %p, %r3, %r1;\n"
    "  @%p bra LOOP;\n"
    "  trap;\n"
    "}\n";

static volatile int callback_ran, host_fn_ran;
static volatile CUresult callback_status = (CUresult)-1;

static void CUDA_CB on_callback(CUstream s, CUresult status, void *data) {
    (void)s; (void)data;
    callback_status = status;
    callback_ran = 1;
}

static void CUDA_CB on_host_fn(void *data) {
    (void)data;
    host_fn_ran = 1;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule module;
    CUfunction kernel;
    CUstream stream;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuModuleLoadData(&module, PTX));
    MUST(cuModuleGetFunction(&kernel, module, "spin_then_trap"));
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    unsigned long long cycles = 200000000ULL; /* about 100 ms at 2 GHz */
    void *params[] = {&cycles};
    MUST(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    CUresult queued_cb = cuStreamAddCallback(stream, on_callback, NULL, 0);
    CUresult queued_fn = cuLaunchHostFunc(stream, on_host_fn, NULL);
    printf("1. queued behind the kernel: cuStreamAddCallback -> %s, cuLaunchHostFunc -> %s\n",
           err_name(queued_cb), err_name(queued_fn));
    for (int i = 0; i < 30 && !(callback_ran && host_fn_ran); i++) sleep_ms(100);
    printf("   after 3 s: the stream callback ran: %s (status %s); the host function ran: %s\n",
           callback_ran ? "yes" : "no", callback_ran ? err_name(callback_status) : "-",
           host_fn_ran ? "yes" : "no");

    printf("2. cuStreamQuery -> %s\n", err_name(cuStreamQuery(stream)));
    callback_ran = 0;
    printf("   then cuStreamAddCallback -> %s, cuLaunchHostFunc -> %s\n",
           err_name(cuStreamAddCallback(stream, on_callback, NULL, 0)),
           err_name(cuLaunchHostFunc(stream, on_host_fn, NULL)));
    sleep_ms(500);
    printf("   after 0.5 s: a callback ran: %s\n", callback_ran ? "yes" : "no");
    return 0;
}
