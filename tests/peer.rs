//! Several contexts at once: peer access, peer copies and peer views. Tests that need two
//! GPUs are ignored (the harness says why) on one; the same-device tests run on any GPU.

use crate::common;

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, Error, ErrorCode, LaunchConfig, Module, Out, Stream,
    StreamFlags, copy_peer, with_context,
};

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// Devices 0 and 1. The harness runs a two-GPU test only where there are two (or with
/// `CUDA_BRAND_REQUIRE_GPUS=2`, where their absence is this panic: a failure).
fn two_gpus() -> (Device, Device) {
    let n = Device::count().expect("a device count");
    assert!(n >= 2, "needs two GPUs, this machine has {n}");
    (Device::get(0).unwrap(), Device::get(1).unwrap())
}

fn peer_copies_between_two_contexts_of_one_device() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let src: Vec<u32> = (0..100_000).collect();
        let in_a = DeviceBuffer::from_slice(a, &src)?;
        with_context(&device, ContextFlags::default(), |b| {
            let mut in_b = DeviceBuffer::<u32>::zeroed(b, src.len())?;
            copy_peer(&mut in_b, b, &in_a, a)?;
            assert_eq!(in_b.to_vec()?, src);
            // and on a stream of b, asynchronously
            let mut again = DeviceBuffer::<u32>::zeroed(b, src.len())?;
            Stream::new(b, StreamFlags::NonBlocking)?
                .scope(|s| s.copy_from_peer(&mut again, &in_a, a))?;
            assert_eq!(again.to_vec()?, src);
            // same device: access is given without a driver call, and is idempotent
            let access = b.enable_peer_access(a)?;
            b.enable_peer_access(a)?;
            assert_eq!(access.view(&in_a)?.to_vec()?, src);
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

fn a_kernel_writes_another_contexts_memory_only_through_a_peer_view() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let mut in_a = DeviceBuffer::from_slice(a, &[1.0f32, 2.0, 3.0])?;
        with_context(&device, ContextFlags::default(), |b| {
            let access = b.enable_peer_access(a)?;
            let module = Module::from_ptx(b, PTX)?;
            // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
            let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
            let view = access.view_mut(&mut in_a)?;
            Stream::new(b, StreamFlags::NonBlocking)?
                .scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (view, 10.0f32)))?;
            Ok::<_, Error>(())
        })?;
        assert_eq!(in_a.to_vec()?, [10.0, 20.0, 30.0]);
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn peer_access_between_two_gpus_is_idempotent() {
    let (d0, d1) = two_gpus();
    assert!(
        d0.can_access_peer(&d1).unwrap(),
        "the two GPUs of this machine have a peer path"
    );
    assert!(!d0.can_access_peer(&d0).unwrap());
    with_context(&d0, ContextFlags::default(), |c0| {
        with_context(&d1, ContextFlags::default(), |c1| {
            c0.enable_peer_access(c1)?;
            c0.enable_peer_access(c1)?; // already enabled: still Ok
            c1.enable_peer_access(c0)?;
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

fn peer_copies_between_two_gpus_preserve_every_byte() {
    let (d0, d1) = two_gpus();
    with_context(&d0, ContextFlags::default(), |c0| {
        let n = 16 << 20; // 64 MiB of u32
        let src: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let on0 = DeviceBuffer::from_slice(c0, &src)?;
        with_context(&d1, ContextFlags::default(), |c1| {
            assert_eq!(c1.device()?, d1);
            let mut on1 = DeviceBuffer::<u32>::zeroed(c1, n)?;
            copy_peer(&mut on1, c1, &on0, c0)?;
            assert!(on1.to_vec()? == src, "device 0 -> device 1");
            let mut back = DeviceBuffer::<u32>::zeroed(c1, n)?;
            Stream::new(c1, StreamFlags::NonBlocking)?
                .scope(|s| s.copy_from_peer(&mut back[..n / 2], &on0[n / 2..], c0))?;
            let half = back.to_vec()?;
            assert!(half[..n / 2] == src[n / 2..], "async device 0 -> device 1");
            assert!(
                half[n / 2..].iter().all(|&x| x == 0),
                "only the first half was written"
            );
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

fn a_kernel_on_gpu_1_reads_and_writes_gpu_0_through_a_peer_view() {
    let (d0, d1) = two_gpus();
    with_context(&d0, ContextFlags::default(), |c0| {
        let mut on0 = DeviceBuffer::from_slice(c0, &vec![2.0f32; 1 << 20])?;
        with_context(&d1, ContextFlags::default(), |c1| {
            let access = c1.enable_peer_access(c0)?;
            let module = Module::from_ptx(c1, PTX)?;
            // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
            let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
            let view = access.view_mut(&mut on0)?;
            Stream::new(c1, StreamFlags::NonBlocking)?
                .scope(|s| s.launch(&scale, scale.config_for(1 << 20)?, (view, 1.5f32)))?;
            Ok::<_, Error>(())
        })?;
        assert!(on0.to_vec()?.iter().all(|&x| x == 3.0));
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A peer view reaches pool memory only where the pool grants the viewing device access:
/// `enable_peer_access` grants it the crate's pool of the peer's device (which the default
/// constructors allocate from), and `cuCtxEnablePeerAccess` maps memory of no pool
/// (`cuMemAlloc`). A view of a buffer of any other pool (a pool of the program's own, the
/// device's default pool) is refused, naming the pool, before a kernel could fault on it;
/// the views that are made reach their memory.
fn a_peer_view_of_a_buffer_of_a_pool_the_crate_did_not_grant_is_refused_naming_the_pool() {
    use cuda_brand::MemoryPool;
    let (d0, d1) = two_gpus();
    let n = 1 << 16;
    let ones = vec![1.0f32; n];
    with_context(&d0, ContextFlags::default(), |c0| {
        let mut of_the_crate = DeviceBuffer::from_slice(c0, &ones)?;
        let own = MemoryPool::new(c0)?;
        let of_own = DeviceBuffer::from_slice_in(c0, &own, &ones)?;
        let default = MemoryPool::device_default(c0)?;
        let mut of_default = DeviceBuffer::from_slice_in(c0, &default, &ones)?;
        // memory of no pool, adopted
        let mut p = 0;
        // SAFETY: the out-pointer is a live local; `c0` is current.
        let rc = unsafe { (common::driver().cuMemAlloc_v2)(&mut p, n * 4) };
        assert_eq!(rc, 0, "cuMemAlloc_v2");
        // SAFETY: allocated in `c0` just now, given over whole; written below before use.
        let mut plain = unsafe { DeviceBuffer::<f32>::from_raw_parts(c0, p, n) }?;
        plain.copy_from_host(&ones)?;
        // SAFETY: the handles are only compared.
        let (own_raw, default_raw) = unsafe { (own.as_raw() as usize, default.as_raw() as usize) };
        with_context(&d1, ContextFlags::default(), |c1| {
            let access = c1.enable_peer_access(c0)?;
            // refused, naming the pool, before anything reaches the GPU
            let e = access.view(&of_own).unwrap_err();
            assert_eq!(e.code(), ErrorCode::PeerAccessNotEnabled, "{e}");
            assert_eq!(e.call(), "PeerAccess::view");
            assert!(e.to_string().contains(&format!("{own_raw:#x}")), "{e}");
            let e = access.view_mut(&mut of_default).unwrap_err();
            assert_eq!(e.code(), ErrorCode::PeerAccessNotEnabled, "{e}");
            assert_eq!(e.call(), "PeerAccess::view_mut");
            assert!(e.to_string().contains(&format!("{default_raw:#x}")), "{e}");
            assert!(e.to_string().contains("default pool"), "{e}");
            assert_eq!(access.view(&of_the_crate)?.len(), n);
            assert_eq!(access.view(&plain)?.len(), n);
            // the views that are made reach their memory
            let module = Module::from_ptx(c1, PTX)?;
            // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
            let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
            let config = scale.config_for(n)?;
            Stream::new(c1, StreamFlags::NonBlocking)?.scope(|s| {
                s.launch(
                    &scale,
                    config,
                    (access.view_mut(&mut of_the_crate)?, 2.0f32),
                )?;
                s.launch(&scale, config, (access.view_mut(&mut plain)?, 3.0f32))
            })?;
            c1.synchronize()
        })?;
        assert!(of_the_crate.to_vec()?.iter().all(|&x| x == 2.0));
        assert!(plain.to_vec()?.iter().all(|&x| x == 3.0));
        assert!(
            of_own.to_vec()? == ones && of_default.to_vec()? == ones,
            "untouched"
        );
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// The driver queues a "synchronous" fill or device copy on the current context's legacy
/// stream and returns before the GPU has finished; the crate waits. When the memory belongs
/// to an outer context of another device, the crate runs the operation in the memory's own
/// context, so the wait is on the right device: each operation is complete when it returns,
/// which a non-blocking stream of the memory's context (not ordered after the legacy
/// stream) then observes.
fn synchronous_operations_on_an_outer_devices_memory_are_complete_inside_a_nested_context() {
    let (d0, d1) = two_gpus();
    with_context(&d0, ContextFlags::default(), |c0| {
        let n = 64 << 20;
        let mut buf = DeviceBuffer::<u8>::zeroed(c0, n)?;
        let mut copy = DeviceBuffer::<u8>::zeroed(c0, n)?;
        let mut host = c0.pinned_zeroed::<u8>(n)?;
        let stream0 = Stream::new(c0, StreamFlags::NonBlocking)?;
        with_context(&d1, ContextFlags::default(), |c1| {
            for round in 1..=4u8 {
                buf.fill(round)?; // device 0's memory, device 1's context current
                stream0.scope(|s| s.copy_to_host(&mut host, &buf))?;
                assert!(host.iter().all(|&x| x == round), "fill, round {round}");
                copy.copy_from_device(&buf)?;
                stream0.scope(|s| s.copy_to_host(&mut host, &copy))?;
                assert!(
                    host.iter().all(|&x| x == round),
                    "device copy, round {round}"
                );
                let pattern = vec![round.wrapping_mul(7); n];
                buf.copy_from_host(&pattern)?;
                stream0.scope(|s| s.copy_to_host(&mut host, &buf))?;
                assert!(host[..] == pattern[..], "host copy, round {round}");
            }
            assert_eq!(
                common::current(),
                common::handle(c1),
                "the nested context is current again"
            );
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

gpu_tests!(
    peer_copies_between_two_contexts_of_one_device,
    a_kernel_writes_another_contexts_memory_only_through_a_peer_view,
    ; two_gpus: [peer_access_between_two_gpus_is_idempotent, peer_copies_between_two_gpus_preserve_every_byte, a_kernel_on_gpu_1_reads_and_writes_gpu_0_through_a_peer_view, a_peer_view_of_a_buffer_of_a_pool_the_crate_did_not_grant_is_refused_naming_the_pool, synchronous_operations_on_an_outer_devices_memory_are_complete_inside_a_nested_context]
);
