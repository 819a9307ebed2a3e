// Rule: while a `KernelMut` of a module exists (a kernel declared with
// `Module::kernel_mut`, which writes the module's global variables), the host can neither
// read nor write the module's globals: `Module::global` needs `&module`, and the
// `KernelMut` holds `&mut module` until its last use.
//
// This is the borrow checker's "cannot borrow `module` as immutable because it is also
// borrowed as mutable": the mutable borrow is the `KernelMut`'s, taken by
// `module.kernel_mut` and kept alive by the launch below it.
//
// Without it: `bump` writes `counter` on the GPU while the host copies it (`to_vec` is a
// `cuMemcpyDtoH` on the legacy stream, not ordered after the non-blocking `stream`), so
// the host reads 40 or 41 depending on timing; no call reports anything. A host *write*
// of the global (`global_mut`) racing the kernel would lose one of the two updates.
//
// Fix: read the global once the `KernelMut` is no longer used, after the scope that
// launched it has returned (the stream is synchronized):
// `{ let mut bump = ...; stream.scope(...)?; } module.global::<i32>("counter")?.to_vec()?`.

use cuda_brand::{ContextFlags, Device, LaunchConfig, Module, Stream, StreamFlags, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut module = Module::from_ptx(ctx, include_str!("../../../kernels/kernels.ptx"))?;
        module.global_mut::<i32>("counter")?.copy_from_host(&[40])?;
        // SAFETY: bump(int by) writes only the module's globals `counter` and `table`.
        let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
        // wrong: a view of a global that `bump` writes, while `bump` exists
        let counter = module.global::<i32>("counter")?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            s.launch(&mut bump, LaunchConfig::linear(1, 32), (1i32,))?;
            println!("counter = {:?}", counter.to_vec()?); // `bump` may still be running
            Ok(())
        })
    })
}
