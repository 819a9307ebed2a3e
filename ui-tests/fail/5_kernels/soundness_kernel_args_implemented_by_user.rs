// Rule: `KernelArgs`, the whole argument list of a launch, is sealed: only the crate's
// tuples implement it (a tuple of one `KernelArg` per declared parameter), and a type of
// your own cannot.
//
// `KernelArgs` has a hidden supertrait (`launch::sealed::Args`, in a private module of the
// crate) whose method builds the `void**` array that `cuLaunchKernel` reads: one pointer
// per C parameter, each to a value of that parameter's type, and the memory span of every
// slice for the overlap check and the stream order. The driver reads that array without a
// length, as many entries as the kernel has parameters. rustc names the hidden supertrait
// and notes that `KernelArgs` is a "sealed trait".
//
// Without it: a user list could hand the driver an array that is too short (the driver
// reads past it, on the host), entries pointing at values of the wrong size, or any device
// address for the kernel to write: `FillWhole` below would give `empty(float *p, size_t
// p_len)` a pointer and a length of its own choosing, and report no span, so no overlap
// check or other stream would know the kernel writes there.
//
// Fix: pass a tuple of arguments, one per parameter, in order: `(&mut buffer,)` for a
// kernel declared `(Out<f32>,)`.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, KernelArgs, LaunchConfig, Module, Out, Stream,
    StreamFlags, with_context,
};

/// The argument list of a one-parameter kernel, built by hand.
struct FillWhole {
    ptr: u64,
    len: usize,
}

// wrong: only the crate's tuples may be a launch's argument list
impl<'s, 'c> KernelArgs<'s, 'c, (Out<f32>,)> for FillWhole {}

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: empty(float *p, size_t p_len) writes at most p[0], and only when
        // p_len == SIZE_MAX.
        let empty = unsafe { module.kernel::<(Out<f32>,)>("empty") }?;
        let buffer = DeviceBuffer::<f32>::zeroed(ctx, 1024)?;
        let args = FillWhole { ptr: unsafe { buffer.as_device_ptr() }, len: usize::MAX }; // SAFETY: see `launch`
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.launch(&empty, LaunchConfig::linear(1, 32), args))
    })
}
