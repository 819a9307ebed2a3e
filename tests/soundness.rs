//! The attacks with safe code of `SOUNDNESS.md` ("Attacks with safe code, and what stops
//! each"), each performed in the form the crate allows, asserting the safe outcome. (The
//! forms it does not allow are compile errors, pinned in `ui-tests/fail/soundness_*`.) Skips without a device; fails instead with
//! `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use cuda_brand::{
    ContextGuard, DeviceBuffer, Error, ErrorCode, In, Kernel, LaunchConfig, Module, Out, Stream,
    StreamFlags,
};

const PTX: &str = include_str!("../kernels/kernels.ptx");

/// About 50 ms of spinning on a 2 GHz GPU: long enough that another stream, unordered,
/// would certainly run first.
const LONG: i64 = 100_000_000;

fn spin<'m, 'ctx>(module: &'m Module<'ctx>) -> Result<Kernel<'m, 'ctx, (i64,)>, Error> {
    // SAFETY: spin(long long) reads its argument and the clock, and writes nothing.
    unsafe { module.kernel::<(i64,)>("spin") }
}

fn streams(ctx: ContextGuard<'_>) -> Result<(Stream<'_>, Stream<'_>), Error> {
    Ok((
        Stream::new(ctx, StreamFlags::NonBlocking)?,
        Stream::new(ctx, StreamFlags::NonBlocking)?,
    ))
}

fn alloc_zeroed_memory_is_zero_for_another_stream_behind_a_long_kernel() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let spin = spin(&module)?;
        let (a, b) = streams(ctx)?;
        let n = 1 << 20;
        for round in 0..3 {
            // plant a pattern in memory the pool will hand out again
            a.scope(|s| {
                // SAFETY: filled right away.
                let old = unsafe { s.alloc::<u32>(n) }?;
                s.fill(old, 0xdead_beef_u32)
            })?;
            let mut seen = vec![1u32; n];
            a.scope_pair(&b, |sa, sb| {
                sa.launch(&spin, LaunchConfig::linear(1, 1), (LONG,))?;
                let fresh = sa.alloc_zeroed::<u32>(n)?; // queued behind the spin on a
                sb.copy_to_host(&mut seen, fresh.into_ref()) // b must wait for a's zeroing
            })?;
            let planted = seen.iter().filter(|&&x| x == 0xdead_beef).count();
            assert_eq!(
                planted, 0,
                "round {round}: b saw the previous allocation's bytes"
            );
            assert!(seen.iter().all(|&x| x == 0), "round {round}");
        }
        Ok(())
    });
}

fn two_streams_writing_one_bound_buffer_run_in_the_order_they_were_queued() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let spin = spin(&module)?;
        let (a, b) = streams(ctx)?;
        let mut buf = DeviceBuffer::<u32>::zeroed(ctx, 1 << 20)?;
        for round in 1..=3u32 {
            a.scope_pair(&b, |sa, sb| {
                let d = sa.bind_mut(&mut buf);
                sa.launch(&spin, LaunchConfig::linear(1, 1), (LONG,))?;
                sa.fill(d, round)?; // first, but behind the spin
                sb.fill(d, round * 100) // second: must land last
            })?;
            assert!(
                buf.to_vec()?.iter().all(|&x| x == round * 100),
                "round {round}: the second write landed first"
            );
        }
        Ok(())
    });
}

fn a_stream_reading_what_another_wrote_waits_and_a_writer_waits_for_readers() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let spin = spin(&module)?;
        let (a, b) = streams(ctx)?;
        let n = 1 << 20;
        let mut buf = DeviceBuffer::<u32>::zeroed(ctx, n)?;
        let mut first = vec![0u32; n];
        let mut second = vec![0u32; n];
        a.scope_pair(&b, |sa, sb| {
            let d = sa.bind_mut(&mut buf);
            sa.launch(&spin, LaunchConfig::linear(1, 1), (LONG,))?;
            sa.fill(d, 5u32)?;
            sb.copy_to_host(&mut first, d.into_ref())?; // read after a's write
            // a write on a after b's read: must not overwrite before b has read
            sb.launch(&spin, LaunchConfig::linear(1, 1), (LONG,))?;
            sb.copy_to_host(&mut second, d.into_ref())?; // queued behind b's spin
            sa.fill(d, 9u32) // must wait for b's second read
        })?;
        assert!(first.iter().all(|&x| x == 5), "b read before a's fill");
        assert!(second.iter().all(|&x| x == 5), "a's fill overtook b's read");
        assert!(buf.to_vec()?.iter().all(|&x| x == 9));
        Ok(())
    });
}

fn four_streams_share_one_buffer_by_chunks_and_overlap() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let streams: Vec<Stream> = (0..4)
            .map(|_| Stream::new(ctx, StreamFlags::NonBlocking))
            .collect::<Result<_, _>>()?;
        let lanes: Vec<&Stream> = streams.iter().collect();
        let n = 1 << 22;
        let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut dev = DeviceBuffer::<f32>::zeroed(ctx, n)?;
        let mut back = vec![0.0f32; n];
        let chunk = n / 8;
        Stream::scope_all(&lanes, |s| {
            let d = s[0].bind_mut(&mut dev);
            for (i, (src, dst)) in host.chunks(chunk).zip(back.chunks_mut(chunk)).enumerate() {
                let lane = &s[i % 4];
                let part = d.slice(i * chunk..(i + 1) * chunk);
                lane.copy_from_host(part, src)?;
                lane.launch(&scale, LaunchConfig::linear(64, 256), (part, 2.0f32))?;
                lane.copy_to_host(dst, part.into_ref())?;
            }
            // then all of it doubled once more on lane 3, after every chunk's lane
            s[3].launch(&scale, LaunchConfig::linear(256, 256), (d, 2.0f32))?;
            Ok::<_, Error>(())
        })?;
        for (i, (&h, &b)) in host.iter().zip(&back).enumerate() {
            assert_eq!(b, 2.0 * h, "element {i}");
        }
        let all = dev.to_vec()?;
        assert!(all.iter().zip(&host).all(|(&x, &h)| x == 4.0 * h));
        Ok(())
    });
}

fn a_launch_whose_output_overlaps_an_input_is_refused_before_the_driver() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t),
        // in bounds of all three lengths.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let n = 1000;
        let start: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut d = DeviceBuffer::from_slice(ctx, &start)?;
        let other = DeviceBuffer::from_slice(ctx, &start)?;
        let e = stream
            .scope(|s| {
                let d = s.bind_mut(&mut d);
                // d[1..] + other[..n-1] into d[..n-1]: in and out share d[1..n-1]
                s.launch(
                    &add,
                    LaunchConfig::linear(4, 256),
                    (d.slice(1..), &other[..n - 1], d.slice(..n - 1)),
                )
            })
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(e.call(), "StreamScope::launch");
        let detail = e.invalid().unwrap().to_string();
        assert!(
            detail.starts_with("`In` argument 0 (3996 bytes at 0x")
                && detail.contains(") and `Out` argument 2 (3996 bytes at 0x"),
            "{detail}"
        );
        assert_eq!(d.to_vec()?, start, "nothing ran");
        // two reads of the same memory are fine, and so is an output beside its inputs
        stream.scope(|s| {
            let d = s.bind_mut(&mut d);
            s.launch(
                &add,
                LaunchConfig::linear(4, 256),
                (&other, &other, d.slice(..)),
            )
        })?;
        let twice: Vec<f32> = start.iter().map(|x| 2.0 * x).collect();
        assert_eq!(d.to_vec()?, twice);
        Ok(())
    });
}

fn an_overlapping_device_copy_is_refused_and_a_disjoint_one_runs() {
    common::in_context(|ctx| {
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let start: Vec<u32> = (0..100).collect();
        let mut d = DeviceBuffer::from_slice(ctx, &start)?;
        let e = stream
            .scope(|s| {
                let v = s.bind_mut(&mut d);
                s.copy_from_device(v.slice(..99), v.slice(1..).into_ref())
            })
            .unwrap_err();
        assert_eq!(e.call(), "StreamScope::copy_from_device");
        assert!(
            e.invalid()
                .unwrap()
                .to_string()
                .starts_with("the destination (396 bytes at 0x"),
            "{e}"
        );
        assert_eq!(d.to_vec()?, start);
        stream.scope(|s| {
            let v = s.bind_mut(&mut d);
            s.copy_from_device(v.slice(..50), v.slice(50..).into_ref())
        })?;
        let want: Vec<u32> = (50..100).chain(50..100).collect();
        assert_eq!(d.to_vec()?, want);
        Ok(())
    });
}

fn a_kernel_that_writes_globals_holds_its_module_and_is_ordered_across_streams() {
    common::in_context(|ctx| {
        let mut module = Module::from_ptx(ctx, PTX)?;
        let spin_module = Module::from_ptx(ctx, PTX)?;
        let spin = spin(&spin_module)?;
        module.global_mut::<i32>("counter")?.copy_from_host(&[0])?;
        {
            // SAFETY: bump(int) writes only the module globals `counter` and `table`.
            let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
            let (a, b) = streams(ctx)?;
            a.scope_pair(&b, |sa, sb| {
                let k = sa.bind_kernel(&mut bump);
                sa.launch(&spin, LaunchConfig::linear(1, 1), (LONG,))?;
                sa.launch(k, LaunchConfig::linear(1, 32), (1i32,))?; // behind the spin
                sb.launch(k, LaunchConfig::linear(1, 32), (10i32,)) // must run after it
            })?;
        }
        assert_eq!(module.global::<i32>("counter")?.to_vec()?, [11]);
        // the last launch wrote the table: table[i] = i * 10
        let table = module.global::<f32>("table")?.to_vec()?;
        assert_eq!(table, (0..16).map(|i| i as f32 * 10.0).collect::<Vec<_>>());
        Ok(())
    });
}

fn a_damaged_image_is_refused_before_the_driver_reads_it() {
    common::in_context(|ctx| {
        let cubin = include_bytes!("../kernels/kernels_sm90.cubin");
        // the section header table moved past the end: the driver would read beyond it
        let mut bad = cubin.to_vec();
        bad[0x28..0x30].copy_from_slice(&(cubin.len() as u64 + 4096).to_le_bytes());
        let e = Module::from_binary(ctx, &bad).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidImage, "{e}");
        assert_eq!(e.call(), "Module::from_binary");
        // every truncation too
        for len in [4, 64, 100, cubin.len() / 2, cubin.len() - 1] {
            let e = Module::from_binary(ctx, &cubin[..len]).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidImage, "truncated to {len}: {e}");
        }
        Ok(())
    });
}

fn ptx_text_that_is_really_an_elf_image_is_refused_before_the_driver() {
    common::in_context(|ctx| {
        // valid UTF-8 and no NUL, so it is a `&str`; the driver would parse it as a cubin
        let header = "\x7fELF\x02\x01\x01\x33\x07\x01\x01\x01\x01\x01\x01\x01";
        let e = Module::from_ptx(ctx, header).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidPtx);
        assert_eq!(e.call(), "Module::from_ptx");
        Ok(())
    });
}

fn pinned_memory_of_an_over_aligned_type_is_aligned_or_refused() {
    #[derive(Clone, Copy)]
    #[repr(C, align(65536))]
    struct Page([u8; 65536]);
    // SAFETY: bytes only; every bit pattern is a value, no padding, it owns nothing.
    unsafe impl cuda_brand::DeviceCopy for Page {}
    common::in_context(|ctx| {
        match cuda_brand::PinnedBuffer::<Page>::zeroed(ctx, 3) {
            Ok(pages) => {
                assert_eq!(pages.as_ptr() as usize % 65536, 0);
                assert!(pages.iter().all(|p| p.0.iter().all(|&b| b == 0)));
            }
            Err(e) => {
                assert_eq!(e.call(), "PinnedBuffer::zeroed");
                assert!(
                    e.invalid().unwrap().to_string().contains("not aligned for"),
                    "{e}"
                );
            }
        }
        Ok(())
    });
}

gpu_tests!(
    ptx_text_that_is_really_an_elf_image_is_refused_before_the_driver,
    pinned_memory_of_an_over_aligned_type_is_aligned_or_refused,
    alloc_zeroed_memory_is_zero_for_another_stream_behind_a_long_kernel,
    two_streams_writing_one_bound_buffer_run_in_the_order_they_were_queued,
    a_stream_reading_what_another_wrote_waits_and_a_writer_waits_for_readers,
    four_streams_share_one_buffer_by_chunks_and_overlap,
    a_launch_whose_output_overlaps_an_input_is_refused_before_the_driver,
    an_overlapping_device_copy_is_refused_and_a_disjoint_one_runs,
    a_kernel_that_writes_globals_holds_its_module_and_is_ordered_across_streams,
    a_damaged_image_is_refused_before_the_driver_reads_it,
);
