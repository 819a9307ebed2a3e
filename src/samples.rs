//! Sample kernels, compiled into the crate: a first kernel to launch before you have your
//! own, and the ones the crate's tests, examples and benchmarks use.
//!
//! [`KERNELS_PTX`] is the PTX of the repository's `kernels/kernels.cu` (generated with
//! `nvcc -ptx -arch=compute_52`, ISA 7.4; `kernels/README.md` in the package says how). The
//! driver JIT-compiles it for the GPU at hand: it loads on any GPU from Maxwell (`sm_52`)
//! on, with a CUDA 11.4 (R470) or newer driver, the crate's minimum. Building needs no CUDA
//! toolkit: the text is in the crate.
//!
//! ```no_run
//! use cuda_brand::prelude::*;
//! use cuda_brand::samples;
//!
//! fn main() -> cuda_brand::Result<()> {
//!     let device = Device::get(0)?;
//!     with_context(&device, ContextFlags::default(), |ctx| {
//!         let module = ctx.module_from_ptx(samples::KERNELS_PTX)?;
//!         // SAFETY: vector_add's C parameter list is this (see the table in
//!         // `cuda_brand::samples`), and it stays below the lengths it is given.
//!         let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
//!         let a = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
//!         let b = ctx.from_slice(&[10.0f32, 20.0, 30.0])?;
//!         let mut c = ctx.zeroed::<f32>(3)?;
//!         ctx.new_stream()?.scope(|s| s.launch(&add, add.config_for(3)?, (&a, &b, &mut c)))?;
//!         assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
//!         Ok(())
//!     })
//! }
//! ```
//!
//! # The kernels
//!
//! Each kernel's C signature and the declaration that matches it. As everywhere in the
//! crate, a slice parameter ([`In<T>`](crate::In), [`Out<T>`](crate::Out)) is two C
//! parameters, the pointer and its element count, and every kernel here keeps its accesses
//! below the counts it is given: that, and the parameter list, is what the `unsafe` of
//! [`Module::kernel`](crate::Module::kernel) promises. The last four are written as
//! NVIDIA's samples write kernels, with bare pointers ([`InPtr<T>`](crate::InPtr),
//! [`OutPtr<T>`](crate::OutPtr), one C parameter each) and `int` sizes: how far they reach
//! depends on their scalar arguments and launch configuration, so their declaration
//! promises, for every launch the program makes, what their row says
//! ([`Module::kernel`](crate::Module::kernel), its section "Pointer parameters").
//!
//! | kernel | C signature | declaration | what it does |
//! |---|---|---|---|
//! | `vector_add` | `(const float *a, size_t a_len, const float *b, size_t b_len, float *c, size_t c_len)` | `kernel::<(In<f32>, In<f32>, Out<f32>)>` | `c[i] = a[i] + b[i]` below all three lengths (a grid-stride loop: any grid covers any length) |
//! | `scale` | `(float *x, size_t x_len, float k)` | `kernel::<(Out<f32>, f32)>` | `x[i] *= k` |
//! | `sum_u64` | `(const unsigned int *in, size_t in_len, unsigned long long *out, size_t out_len)` | `kernel::<(In<u32>, Out<u64>)>` | `out[0] +=` the sum of `in` (exact: integers, one `atomicAdd` per block); the block size must be a power of two for a right sum (any size up to 1024 stays in bounds) |
//! | `bump` | `(int by)`, and the module's globals `__device__ int counter` and `__device__ float table[16]` | `kernel_mut::<(i32,)>` | `counter += by` (thread 0 of block 0), `table[i] = i * by` for `i < 16`: it writes globals, so [`Module::kernel_mut`](crate::Module::kernel_mut) |
//! | `spin` | `(long long cycles)` | `kernel::<(i64,)>` | busy-waits about `cycles` clock cycles of the GPU, touching no memory: keeps a stream busy |
//! | `empty` | `(float *p, size_t p_len)` | `kernel::<(Out<f32>,)>` | nothing (the launch-overhead benchmark) |
//! | `empty8` | `(float *a, size_t na, float *b, size_t nb, const float *c, size_t nc, const float *d, size_t nd)` | `kernel::<(Out<f32>, Out<f32>, In<f32>, In<f32>)>` | nothing, with eight C parameters |
//! | `write_wild` | `(float *p, size_t p_len)` | none is true | writes through a wild pointer on purpose: an illegal address, which ends the context (the crate's sticky-error tests). Do not launch it |
//! | `saxpy` | `(int n, float a, const float *x, float *y)` | `kernel::<(i32, f32, InPtr<f32>, OutPtr<f32>)>` | `y[i] = a * x[i] + y[i]` for `i < n`, one element per thread (a grid of at least `n` threads covers them all): the declaration promises that every launch passes an `n` of at most both lengths, with fewer than 2³¹ threads (the index is an `int`) |
//! | `vectorAdd` | `(const float *A, const float *B, float *C, int numElements)` | `kernel::<(InPtr<f32>, InPtr<f32>, OutPtr<f32>, i32)>` | `C[i] = A[i] + B[i]` for `i < numElements`, one element per thread (NVIDIA's cuda-samples `vectorAdd`, unchanged): the declaration promises that every launch passes a `numElements` of at most the three lengths, with fewer than 2³¹ threads |
//! | `reduce` | `(const float *g_idata, float *g_odata, unsigned int n)` | `kernel::<(InPtr<f32>, OutPtr<f32>, u32)>` | one partial sum per block of `2 * blockDim.x` inputs into `g_odata[blockIdx.x]` (cuda-samples' `reduce3`): the declaration promises that every launch passes an `n` of at most the input's length, at most as many blocks as the output has elements, and `blockDim.x * 4` bytes of dynamic shared memory (`sdata`); a power-of-two block for a right sum |
//! | `stencil2d` | `(const float *in, size_t inPitch, float *out, size_t outPitch, int width, int height)` | `kernel::<(InPtr<f32>, usize, OutPtr<f32>, usize, i32, i32)>` | a five-point average of a pitched `width` x `height` array (pitches in bytes, as `cuMemAllocPitch` gives them: a [`DeviceBuffer2D`](crate::DeviceBuffer2D) as `&in` / `&mut out`, its [`pitch_bytes`](crate::DeviceBuffer2D::pitch_bytes)); edges repeat their nearest value: the declaration promises that every launch passes each buffer's own pitch, a `width` and `height` within both buffers', and fewer than 2³¹ threads in x |
//!
//! The CUDA C source, `kernels/kernels.cu`, ships in the package next to the PTX.

/// The PTX of `kernels/kernels.cu`: the kernels in the [module's table](self#the-kernels),
/// for [`ContextGuard::module_from_ptx`](crate::ContextGuard::module_from_ptx) or
/// [`Module::from_ptx`](crate::Module::from_ptx).
pub const KERNELS_PTX: &str = include_str!("../kernels/kernels.ptx");

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel the module's documentation lists is in the PTX, and no other.
    #[test]
    fn the_table_lists_every_kernel_of_the_ptx() {
        let mut entries: Vec<&str> = KERNELS_PTX
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".visible .entry "))
            .map(|l| l.trim_end_matches('('))
            .collect();
        entries.sort_unstable();
        assert_eq!(
            entries,
            [
                "bump",
                "empty",
                "empty8",
                "reduce",
                "saxpy",
                "scale",
                "spin",
                "stencil2d",
                "sum_u64",
                "vectorAdd",
                "vector_add",
                "write_wild"
            ]
        );
        let source = include_str!("samples.rs");
        for name in entries {
            assert!(
                source.contains(&format!("//! | `{name}` | ")),
                "the table has no row for `{name}`"
            );
        }
        // the globals `bump` writes
        for global in [
            ".global .align 4 .u32 counter;",
            ".global .align 4 .b8 table[64];",
        ] {
            assert!(KERNELS_PTX.contains(global), "{global}");
        }
        // ISA 7.4 (CUDA 11.4, the crate's minimum driver) for sm_52
        assert!(KERNELS_PTX.contains(".version 7.4\n.target sm_52\n"));
    }
}
