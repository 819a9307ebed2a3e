// Rule: `KernelArg` is sealed: only the crate decides which Rust values may stand for a
// kernel parameter, and what pointer and length the driver gets for each. A type of your
// own cannot implement it.
//
// `KernelArg` has a hidden supertrait (in a private module of the crate) whose method lays
// the argument out as the bytes `cuLaunchKernel` copies into the kernel's parameters. The
// crate implements it only for borrows of live buffers of the launch's context (`&buffer`,
// `&buffer[range]`, `DeviceRef`, `DeviceMut`), so the address and the element count always
// come from an allocation that the scope keeps borrowed until the kernel has run. rustc
// reports the missing hidden supertrait, `launch::sealed::Arg`, which no code outside the
// crate can name, and adds a note that `KernelArg` is a "sealed trait": that is how the
// seal shows.
//
// Without it: the kernel trusts the pointer and the length it is given. `RawSlice` below
// claims 1 Mi floats starting past the end of `b`: `vector_add` keeps below the length it
// is told, so it reads 4 MiB of whatever lies there: an illegal address (a sticky error
// that ends the process's CUDA use: docs/c/sticky_error.out) if nothing is mapped, other
// allocations' data, silently, if something is. The overlap check and the stream order
// would also see only the span the forged argument claims.
//
// Fix: pass memory the crate can vouch for: `&b[range]` for an `In<T>`, `&mut c[range]`
// for an `Out<T>`, or a `DeviceRef`/`DeviceMut` bound by the scope.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, In, KernelArg, LaunchConfig, Module, Out, Stream,
    StreamFlags, with_context,
};

/// A device address and an element count, put together by hand.
#[derive(Clone, Copy)]
struct RawSlice {
    ptr: u64,
    len: usize,
}

// wrong: a user type may not stand for an `In<f32>`
impl<'s, 'c> KernelArg<'s, 'c, In<f32>> for RawSlice {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        // reads a and b and writes c, each below the length it is given.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let b = DeviceBuffer::from_slice(ctx, &[1.0f32; 1024])?;
        let mut c = DeviceBuffer::<f32>::zeroed(ctx, 1 << 20)?;
        let a = RawSlice { ptr: unsafe { b.as_device_ptr() } + 4096, len: 1 << 20 }; // SAFETY: see `launch`
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.launch(&add, LaunchConfig::linear(4096, 256), (a, &b, &mut c)))
    })
}
