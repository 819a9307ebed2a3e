//! The allocation path of devices without memory pools (`MEMORY_POOLS_SUPPORTED` = 0),
//! forced on a device that has them with `CUDA_BRAND_NO_MEMORY_POOLS=1`: a binary of its
//! own, because the switch is read once per process.

mod common;

use cuda_brand::{ContextFlags, DeviceBuffer, Error, Stream, StreamFlags, with_context};

fn scopes_allocate_with_cu_mem_alloc_and_free_after_the_synchronization() {
    // SAFETY: the only test of this binary sets it before any thread reads the environment.
    unsafe { std::env::set_var("CUDA_BRAND_NO_MEMORY_POOLS", "1") };
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |outer| {
        let stream = Stream::new(outer, StreamFlags::NonBlocking)?;
        let mut out = vec![1u32; 1 << 16];
        stream.scope(|s| {
            let zeroed = s.alloc_zeroed::<u32>(1 << 16)?;
            assert_eq!(
                // SAFETY: only queried while the scope holds `zeroed`.
                common::mempool_of(unsafe { zeroed.as_device_ptr() }),
                0,
                "from cuMemAlloc, not a pool"
            );
            s.copy_to_host(&mut out, zeroed.into_ref())
        })?;
        assert!(out.iter().all(|&x| x == 0));
        // from inside a nested context: the memory is still the stream's context's, and it
        // is freed there (the sanitizer run checks that nothing leaks)
        let mut host = vec![0u16; 1000];
        let mut keep = DeviceBuffer::<u16>::zeroed(outer, 1000)?;
        with_context(&device, ContextFlags::default(), |_inner| {
            stream.scope(|s| {
                let scratch = s.alloc_zeroed::<u16>(1000)?;
                s.fill(scratch, 77u16)?;
                s.copy_from_device(&mut keep, scratch.into_ref())?;
                s.copy_to_host(&mut host, scratch.into_ref())
            })
        })?;
        assert_eq!(host, vec![77; 1000]);
        assert_eq!(keep.to_vec()?, vec![77; 1000]);
        // buffers too come from cuMemAlloc here, and go back with cuMemFree
        assert_eq!(
            // SAFETY: only queried while `keep` is alive.
            common::mempool_of(unsafe { keep.as_device_ptr() }),
            0,
            "from cuMemAlloc"
        );
        assert!(cuda_brand::MemoryPool::of_device(outer).is_err());
        for _ in 0..50 {
            stream.scope(|s| s.alloc_zeroed::<u8>(4096).map(drop))?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

gpu_test_main!(scopes_allocate_with_cu_mem_alloc_and_free_after_the_synchronization,);
