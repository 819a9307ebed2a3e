// Safety profile (`#![deny(unsafe_code)]` at the crate's root, allowed only in the module
// of kernel declarations; crate docs, "Safety profile"): `nccl::Communicator::as_raw`
// (feature `nccl`; run by `tests/ui_nccl.rs`) is an `unsafe fn`, so the lint refuses it.
//
// Why: a raw handle outlives the value it came from and reaches the driver without the
// brand or a scope: code holding it can destroy or abort the communicator while operations
// of it are queued, or queue operations on buffers no scope holds, and no borrow stops it.
//
// Fix: the communicator's operations in a scope (`comm.all_reduce(s, ...)`); code that
// must hand the handle to another CUDA library does so in a module of its own that allows
// `unsafe_code`, where the promise is written down.

#![deny(unsafe_code)]

use cuda_brand::nccl::Clique;
use cuda_brand::{Device, with_primary_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let clique = Clique::new(&[device])?;
    with_primary_context(&device, |ctx| {
        let comm = clique.communicator(ctx)?;
        // SAFETY: (the case is about the lint, not the promise)
        let handle = unsafe { comm.as_raw() };
        println!("{handle:?}");
        Ok(())
    })
}
