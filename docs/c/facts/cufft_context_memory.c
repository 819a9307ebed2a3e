/* Does cuFFT free everything a plan allocated when the plan is destroyed?
 *
 * compute-sanitizer's leak check found device memory allocated inside cufftMakePlanMany64
 * still allocated when the crate's cuFFT tests destroyed their contexts, after every plan
 * had been destroyed with cufftDestroy. This program asks the same of cuFFT with raw calls
 * only, no crate: in a created context, make one plan, destroy it, destroy the context;
 * then again in the device's primary context. Run it under compute-sanitizer's leak check:
 *
 *   nvcc -o /tmp/cufft_context_memory docs/c/facts/cufft_context_memory.c -lcuda -lcufft
 *   compute-sanitizer --leak-check full /tmp/cufft_context_memory
 *
 * The program prints what it did and the driver's count of free memory around each step;
 * cufft_context_memory.out is what it printed, and cufft_context_memory.sanitizer.out what
 * compute-sanitizer reported, on the GPU machine. */
#include <cuda.h>
#include <cufft.h>
#include <stdio.h>
#include <stdlib.h>

#define CU(call)                                                                        \
    do {                                                                                \
        CUresult r_ = (call);                                                           \
        if (r_ != CUDA_SUCCESS) {                                                       \
            const char *s_ = NULL;                                                      \
            cuGetErrorName(r_, &s_);                                                    \
            fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?");                   \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)
#define FFT(call)                                                                       \
    do {                                                                                \
        cufftResult r_ = (call);                                                        \
        if (r_ != CUFFT_SUCCESS) {                                                      \
            fprintf(stderr, "%s failed: cufftResult %d\n", #call, (int)r_);             \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)

static size_t free_bytes(void) {
    size_t free = 0, total = 0;
    CU(cuMemGetInfo(&free, &total));
    return free;
}

/* One plan of n points (C2C, single precision), made and destroyed in the current context. */
static void one_plan(int n) {
    size_t before = free_bytes();
    cufftHandle plan;
    size_t work = 0;
    FFT(cufftCreate(&plan));
    FFT(cufftMakePlan1d(plan, n, CUFFT_C2C, 1, &work));
    size_t made = free_bytes();
    FFT(cufftDestroy(plan));
    size_t after = free_bytes();
    printf("  plan of %d points: work area %zu B; free memory -%zu B after cufftMakePlan1d, "
           "-%zu B after cufftDestroy\n",
           n, work, before - made, before - after);
}

int main(void) {
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    int version = 0;
    FFT(cufftGetVersion(&version));
    printf("cuFFT %d\n", version);

    printf("created context (cuCtxCreate), two plans, then cuCtxDestroy:\n");
    CUcontext ctx;
    CU(cuCtxCreate(&ctx, NULL, 0, dev));
    one_plan(1 << 20);
    one_plan(1 << 20);
    CU(cuCtxDestroy(ctx));

    printf("primary context (cuDevicePrimaryCtxRetain), one plan, then release:\n");
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxPushCurrent(ctx));
    one_plan(1 << 20);
    CU(cuCtxPopCurrent(&ctx));
    CU(cuDevicePrimaryCtxRelease(dev));
    printf("done\n");
    return 0;
}
