// Peer copies name both brands, destination first; a peer view lets device 1's kernels
// use device 0's memory once peer access is enabled.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, Stream, StreamFlags, copy_peer, with_context};

fn main() {
    let (Ok(d0), Ok(d1)) = (Device::get(0), Device::get(1)) else { return };
    with_context(&d0, ContextFlags::default(), |c0| {
        let on0 = DeviceBuffer::from_slice(c0, &[1u32, 2, 3])?;
        with_context(&d1, ContextFlags::default(), |c1| {
            let mut on1 = DeviceBuffer::<u32>::zeroed(c1, 3)?;
            copy_peer(&mut on1, c1, &on0, c0)?;
            let access = c1.enable_peer_access(c0)?;
            let view = access.view(&on0)?;
            Stream::new(c1, StreamFlags::NonBlocking)?.scope(|s| s.copy_from_device(&mut on1, view))?;
            Ok::<_, cuda_brand::Error>(())
        })
    })
    .unwrap();
}
