// Allowed: a buffer, a stream and an event of an outer context used inside a nested
// `with_context`. The outer context is alive for the whole inner closure, and everything
// used together carries the outer brand, so it type-checks. Stream operations do not need
// their context current (docs/c/facts/stream_ops_other_context.out: copies, launches and
// event records on A's stream while B is current), and an allocation with the outer
// guard pushes the outer context around the call.

use cuda_brand::{
    ContextFlags, DeviceBuffer, Event, EventFlags, Stream, StreamFlags, with_context,
};

fn main() {
    let Ok(device) = cuda_brand::Device::get(0) else {
        return;
    };
    with_context(&device, ContextFlags::default(), |outer| {
        let stream = Stream::new(outer, StreamFlags::NonBlocking)?;
        let mut done = Event::new(outer, EventFlags::new())?;
        let mut on_device = DeviceBuffer::<u32>::zeroed(outer, 1024)?;
        let inner_sum = with_context(&device, ContextFlags::default(), |inner| {
            // the inner context is current here; the outer one's values keep working
            let inner_buf = DeviceBuffer::from_slice(inner, &[1u32; 1024])?;
            let mut copy = DeviceBuffer::<u32>::zeroed(outer, 1024)?; // in `outer`
            let mut host = vec![0u32; 1024];
            let recorded = stream.scope(|s| {
                let d = s.bind_mut(&mut on_device);
                s.fill(d, 3)?;
                s.copy_from_device(&mut copy, d.into_ref())?;
                s.copy_to_host(&mut host, d.into_ref())?;
                done.record(s)
            })?;
            recorded.synchronize()?;
            assert_eq!(host, vec![3; 1024]);
            assert_eq!(copy.to_vec()?, vec![3; 1024]);
            Ok::<_, cuda_brand::Error>(inner_buf.to_vec()?.iter().sum::<u32>())
        })?;
        assert_eq!(inner_sum, 1024);
        assert_eq!(on_device.to_vec()?, vec![3; 1024]);
        Ok::<_, cuda_brand::Error>(())
    })
    .expect("outer context's values inside a nested context");
}
