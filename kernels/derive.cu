// Kernels of tests/derive.rs: they read and write structs that the Rust side declares with
// `#[derive(DeviceCopy)]` and `#[repr(C)]`, so a field at another offset than C's gives
// wrong values.
//
// Regenerate the committed PTX on a machine with CUDA (see kernels/README.md):
//   nvcc -ptx -arch=compute_52 kernels/derive.cu -o kernels/derive.ptx  (then .version 7.4)
//
// A slice parameter (`In<T>` / `Out<T>` on the Rust side) is the pointer and its element
// count, as in kernels.cu.

#include <stddef.h>

// Rust: struct Particle { pos: [f32; 3], mass: f32, id: u32, flags: u32 } (24 bytes).
struct Particle {
    float pos[3];
    float mass;
    unsigned int id;
    unsigned int flags;
};

// Rust: struct Cell { particle: Particle, key: u64, weight: f64 } (40 bytes, align 8).
struct Cell {
    struct Particle particle;
    unsigned long long key;
    double weight;
};

// out[i]: in[i] moved by (1, 2, 3) * mass, id + 1000, flags with bit 8 set.
extern "C" __global__ void particles_step(const struct Particle *in, size_t in_len,
                                          struct Particle *out, size_t out_len) {
    size_t n = in_len < out_len ? in_len : out_len;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        struct Particle p = in[i];
        for (int k = 0; k < 3; ++k) {
            p.pos[k] += (float)(k + 1) * p.mass;
        }
        p.id += 1000;
        p.flags |= 0x100;
        out[i] = p;
    }
}

// out[i] = key + particle.id + (unsigned long long)weight + (unsigned long long)particle.mass.
extern "C" __global__ void cells_sum(const struct Cell *in, size_t in_len,
                                     unsigned long long *out, size_t out_len) {
    size_t n = in_len < out_len ? in_len : out_len;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        struct Cell c = in[i];
        out[i] = c.key + c.particle.id + (unsigned long long)c.weight
                 + (unsigned long long)c.particle.mass;
    }
}
