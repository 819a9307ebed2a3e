// Ordinary launches: a typed kernel with read and written slices, a bound buffer written
// by two launches in one scope, sub-views, and scalars.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, In, LaunchConfig, Module, Out, Stream, StreamFlags, with_context,
};

fn main() {
    let Ok(device) = Device::get(0) else { return };
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../../kernels/kernels.ptx"))?;
        // SAFETY: both kernels stay below the lengths they are given and write only `Out`s.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        // SAFETY: as above.
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let (a, b) = (DeviceBuffer::from_slice(ctx, &[1.0f32; 64])?, DeviceBuffer::from_slice(ctx, &[2.0f32; 64])?);
        let mut c = DeviceBuffer::<f32>::zeroed(ctx, 64)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            let c = s.bind_mut(&mut c);
            s.launch(&add, add.config_for(64)?, (&a, &b[..], c))?;
            s.launch(&scale, LaunchConfig::linear(1, 64), (c.slice(..32), 0.5f32))
        })?;
        assert_eq!(c.to_vec()?[0], 1.5);
        Ok::<_, cuda_brand::Error>(())
    })
    .unwrap();
}
