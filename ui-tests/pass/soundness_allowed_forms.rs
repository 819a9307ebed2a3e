// Allowed: the forms the soundness rules leave open, next to the ones they close
// (`ui-tests/fail/soundness_*`).
//
// - a view bound on one stream of a multi-stream scope (`Stream::scope_all`) and used on
//   another: the crate orders the two streams;
// - a `KernelMut` bound once with `bind_kernel` and launched twice by that scope, and
//   launched once through `&mut kernel`;
// - a peer view of an owned buffer, sub-sliced (two contexts of one device here, so it runs
//   on a machine with one GPU);
// - `Module::from_binary_unchecked` inside `unsafe`, with the caller's promise in a SAFETY
//   comment.

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, ErrorCode, In, LaunchConfig, Module, Out, Stream,
    StreamFlags, with_context,
};

fn main() -> cuda_brand::Result<()> {
    let Ok(device) = Device::get(0) else {
        return Ok(());
    };
    with_context(&device, ContextFlags::default(), |c0| {
        // one view, written on stream 0 and read on stream 1 of one scope
        let streams = [
            Stream::new(c0, StreamFlags::NonBlocking)?,
            Stream::new(c0, StreamFlags::NonBlocking)?,
        ];
        let mut on_device = DeviceBuffer::<u32>::zeroed(c0, 1 << 16)?;
        let mut host = vec![0u32; 1 << 16];
        Stream::scope_all(&streams.each_ref(), |s| {
            let d = s[0].bind_mut(&mut on_device);
            s[0].fill(d, 7)?;
            s[1].copy_to_host(&mut host, d.into_ref()) // waits for stream 0's fill
        })?;
        assert!(host.iter().all(|&x| x == 7));

        // a kernel that writes its module's globals: bound once and launched twice, then
        // launched once through `&mut`
        let mut module = Module::from_ptx(c0, include_str!("../../kernels/kernels.ptx"))?;
        {
            // SAFETY: bump(int by) writes only the module's globals `counter` and `table`.
            let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
            let one = LaunchConfig::linear(1, 32);
            streams[0].scope(|s| {
                let bound = s.bind_kernel(&mut bump);
                s.launch(bound, one, (1i32,))?;
                s.launch(bound, one, (1i32,))
            })?;
            streams[1].scope(|s| s.launch(&mut bump, one, (1i32,)))?;
        } // `bump` is gone: the globals may be read again
        assert_eq!(module.global::<i32>("counter")?.to_vec()?, [3]);

        // a peer view of an owned buffer of another context, sub-sliced
        let on0 = DeviceBuffer::from_slice(c0, &[1.0f32, 2.0, 3.0, 4.0])?;
        with_context(&device, ContextFlags::default(), |c1| {
            let c1_sees_c0 = c1.enable_peer_access(c0)?;
            let tail = &c1_sees_c0.view(&on0)?[2..];
            let module = Module::from_ptx(c1, include_str!("../../kernels/kernels.ptx"))?;
            // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*,
            // size_t) reads a and b and writes c, each below the length it is given.
            let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
            let mut sum = DeviceBuffer::<f32>::zeroed(c1, 2)?;
            let stream = Stream::new(c1, StreamFlags::NonBlocking)?;
            stream.scope(|s| s.launch(&add, LaunchConfig::linear(1, 32), (tail, tail, &mut sum)))?;
            assert_eq!(sum.to_vec()?, [6.0, 8.0]);
            Ok::<_, cuda_brand::Error>(())
        })?;

        // an image loaded without the check, under the caller's promise
        let image = include_bytes!("../../kernels/kernels_sm90.cubin");
        // SAFETY: `kernels_sm90.cubin` is nvcc's output for `kernels/kernels.cu`, committed
        // with the crate and included whole at compile time: complete and undamaged.
        match unsafe { Module::from_binary_unchecked(c0, image) } {
            Ok(module) => drop(module.function("scale")?),
            // an sm_90 image on a GPU of another architecture
            Err(e) if e.code() == ErrorCode::NoBinaryForGpu => {}
            Err(e) => return Err(e),
        }
        Ok(())
    })
}
