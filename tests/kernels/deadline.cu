// Kernels of the bounded-wait and event tests (tests/events.rs). PTX: see README.md here.

// Spins for `ns` nanoseconds of the GPU's global timer, then writes `value` to `out[i]` for
// its thread `i` below `out_len`: a kernel that is still running when a short deadline
// passes, and whose result shows that it finished.
extern "C" __global__ void spin_then_fill(unsigned long long ns, unsigned int *out,
                                          size_t out_len, unsigned int value) {
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    unsigned long long now = start;
    while (now - start < ns) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    }
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < out_len) {
        out[i] = value;
    }
}
