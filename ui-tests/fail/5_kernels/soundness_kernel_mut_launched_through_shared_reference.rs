// Rule: a `KernelMut` (a kernel that writes its module's global variables) is launched
// through an exclusive borrow: `s.launch(&mut bump, ...)` once, or bound once with
// `let bump = s.bind_kernel(&mut bump);` and then launched any number of times by that
// scope. `&bump` is not launchable.
//
// The `Launch` trait (sealed) is implemented for `&Kernel`, `&mut KernelMut` and
// `ScopedKernel` only; the message comes from its `on_unimplemented` note.
//
// Without it: `&KernelMut` is shared, so two scopes on two streams could each launch the
// kernel at once. `bump` does `counter += by` (a read-modify-write of a global, not
// atomic): two launches running unordered on two streams can both read the same old value,
// and one update is lost, silently. The exclusive borrow makes every launch of a
// `KernelMut` belong to one scope, which runs them in order on its stream (or, in a
// multi-stream scope, orders them like writes of the same memory).
//
// Fix: `s.launch(&mut bump, LaunchConfig::linear(1, 32), (1i32,))`.

use cuda_brand::{ContextFlags, Device, LaunchConfig, Module, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        // SAFETY: bump(int by) writes only the module's globals `counter` and `table`.
        let bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| s.launch(&bump, LaunchConfig::linear(1, 32), (1i32,)))
    })
}
