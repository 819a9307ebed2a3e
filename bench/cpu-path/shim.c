/* A stand-in for libcuda.so.1 (scripts/cpu-path): the context stack of the calling thread
 * and the few calls that entering a context makes; scripts/cpu-path adds every other entry
 * point the crate loads, each returning 999 (CUDA_ERROR_UNKNOWN). */
static __thread void *stack[64];
static __thread int top = 0;
unsigned cuInit(unsigned flags) { (void)flags; return 0; }
unsigned cuDriverGetVersion(int *v) { *v = 13000; return 0; }
unsigned cuCtxPushCurrent_v2(void *c) { if (top == 64) return 999; stack[top++] = c; return 0; }
unsigned cuCtxPopCurrent_v2(void **c) { if (!top) return 201; void *x = stack[--top]; if (c) *c = x; return 0; }
unsigned cuCtxGetCurrent(void **c) { *c = top ? stack[top - 1] : 0; return 0; }
unsigned cuCtxGetDevice(int *d) { if (!top) return 201; *d = 0; return 0; }
unsigned cuDeviceGet(int *d, int ordinal) { *d = ordinal; return ordinal == 0 ? 0 : 101; }
unsigned cuDeviceGetCount(int *n) { *n = 1; return 0; }
