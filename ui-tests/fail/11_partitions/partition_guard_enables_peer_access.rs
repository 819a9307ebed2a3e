// Rule: peer access is enabled by a whole context's guard only: a partition's guard
// (`ContextGuard<'p, Unphased, Partitioned>`) is not `Unpartitioned`, on either side of
// `enable_peer_access`.
//
// Without it: between two partitions of one device the token comes without a driver call (one
// device's memory is its own), so partition A's kernels could be handed partition B's buffers
// through `PeerAccess::view`, which the partitions' brands keep apart: nothing the crate can see
// orders A's streams after B's, and B's kernel may still be writing what A reads. Between two
// devices, `cuCtxEnablePeerAccess` would be asked of a green context's `CUcontext` form, which
// shares the device's memory mappings with the primary context: the grant would not be the
// partition's.
//
// Fix: enable peer access before `with_partitions`, in a `with_context` closure, or copy
// between partitions through the host.

use cuda_brand::prelude::*;
use cuda_brand::with_partitions;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_partitions(&device, |sms| {
        let (first, second) = sms.split(16)?;
        first.enter(|a| {
            second.enter(|b| {
                let _access = a.enable_peer_access(b)?; // a partition's guard: does not compile
                Ok::<_, Error>(())
            })
        })
    })
}
