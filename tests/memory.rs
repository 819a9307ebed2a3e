//! Device and pinned memory on a real GPU: round trips, views, fills, bad input.
//! Skips without a device; fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use std::panic::{self, AssertUnwindSafe};

use cuda_brand::{
    ContextFlags, ContextGuard, DeviceBuffer, DeviceCopy, Error, ErrorCode, PinnedBuffer, Stream,
    StreamFlags, with_context,
};

fn pattern<T: DeviceCopy>(len: usize, make: impl Fn(usize) -> T) -> Vec<T> {
    (0..len).map(make).collect()
}

fn round_trip<T: DeviceCopy + PartialEq + std::fmt::Debug>(
    ctx: ContextGuard<'_>,
    host: &[T],
) -> Result<(), Error> {
    let buf = DeviceBuffer::from_slice(ctx, host)?;
    assert_eq!(buf.len(), host.len());
    assert_eq!(buf.size_in_bytes(), std::mem::size_of_val(host));
    assert!(buf.to_vec()? == host, "to_vec of {} elements", host.len());
    // start from different contents (the reverse), so a copy that does nothing fails
    let mut back: Vec<T> = host.iter().rev().copied().collect();
    let mut other = DeviceBuffer::from_slice(ctx, &back)?;
    other.copy_from_device(&buf)?;
    other.copy_to_host(&mut back)?;
    assert!(
        back == host,
        "device-to-device then copy_to_host of {} elements",
        host.len()
    );
    Ok(())
}

/// A struct of mixed fields without padding (16 bytes: 8, 2, then 6 of an explicit
/// `_pad`), where a tuple `(u64, u16)` would have 6 bytes of padding and is not `DeviceCopy`.
#[cfg(feature = "derive")]
#[derive(Clone, Copy, Debug, PartialEq, cuda_brand::DeviceCopy)]
#[repr(C)]
struct Tagged {
    big: u64,
    small: u16,
    _pad: [u8; 6],
}

#[cfg(feature = "derive")]
impl Tagged {
    fn new(i: usize) -> Tagged {
        Tagged {
            big: i as u64 * 3 + (1 << 40),
            small: i as u16,
            _pad: [0xC3; 6],
        }
    }
}

fn copy_round_trip_preserves_values_of_several_types_and_sizes() {
    common::in_context(|ctx| {
        for len in [0, 1, 4097] {
            round_trip(ctx, &pattern(len, |i| i as u8))?;
            round_trip(ctx, &pattern(len, |i| -(i as i32) * 7919))?;
            round_trip(ctx, &pattern(len, |i| i as f64 * 0.5 - 3.25))?;
            round_trip(ctx, &pattern(len, |i| [i as f32, 1.5, -(i as f32), 1e30]))?;
            round_trip(
                ctx,
                &pattern(len, |i| [i as u16, i as u16 ^ 0xA5A5, !(i as u16)]),
            )?;
            #[cfg(feature = "derive")]
            round_trip(ctx, &pattern(len, Tagged::new))?;
        }
        Ok(())
    });
}

fn a_64_mib_buffer_round_trips() {
    common::in_context(|ctx| {
        let n = (64 << 20) / 4;
        let host: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let buf = DeviceBuffer::from_slice(ctx, &host)?;
        assert_eq!(buf.size_in_bytes(), 64 << 20);
        let back = buf.to_vec()?;
        assert!(
            back == host,
            "first mismatch at {:?}",
            back.iter().zip(&host).position(|(a, b)| a != b)
        );
        Ok(())
    });
}

fn zero_length_buffers_allocate_nothing_and_work() {
    common::in_context(|ctx| {
        let mut buf = DeviceBuffer::<u32>::zeroed(ctx, 0)?;
        assert!(buf.is_empty());
        assert_eq!(
            // SAFETY: only compared.
            unsafe { buf.as_device_ptr() },
            256,
            "the sentinel address, not an allocation"
        );
        buf.copy_from_host(&[])?;
        buf.fill(5)?;
        assert_eq!(buf.to_vec()?, Vec::<u32>::new());
        assert_eq!(buf.chunks(4).count(), 0);
        let pinned = PinnedBuffer::<f32>::zeroed(ctx, 0)?;
        assert!(pinned.is_empty());
        Ok(())
    });
}

fn zeroed_is_zero_and_fill_sets_every_element() {
    common::in_context(|ctx| {
        let mut b8 = DeviceBuffer::<u8>::zeroed(ctx, 1001)?;
        assert_eq!(b8.to_vec()?, vec![0u8; 1001]);
        b8.fill(0xab)?;
        assert_eq!(b8.to_vec()?, vec![0xabu8; 1001]);
        let mut b16 = DeviceBuffer::<i16>::zeroed(ctx, 777)?;
        b16.fill(-2)?;
        assert_eq!(b16.to_vec()?, vec![-2i16; 777]);
        let mut b32 = DeviceBuffer::<u32>::zeroed(ctx, 4097)?;
        b32.fill(0xdead_beef)?;
        assert_eq!(b32.to_vec()?, vec![0xdead_beefu32; 4097]);
        let mut f = DeviceBuffer::<f32>::zeroed(ctx, 3)?;
        f.fill(-1.25)?;
        assert_eq!(f.to_vec()?, vec![-1.25f32; 3]);
        Ok(())
    });
}

fn views_and_split_copies_touch_only_their_range() {
    common::in_context(|ctx| {
        let mut buf = DeviceBuffer::from_slice(ctx, &(0..10u32).collect::<Vec<_>>())?;
        assert_eq!(buf[2..5].to_vec()?, [2, 3, 4]);
        assert_eq!(buf[..=1].to_vec()?, [0, 1]);
        assert_eq!(buf[8..].len(), 2);
        buf[3..6].fill(99)?;
        assert_eq!(buf.to_vec()?, [0, 1, 2, 99, 99, 99, 6, 7, 8, 9]);
        {
            let (left, right) = buf.split_at_mut(5);
            left.copy_from_device(right)?;
            right.copy_from_host(&[50, 51, 52, 53, 54])?;
        }
        assert_eq!(buf.to_vec()?, [99, 6, 7, 8, 9, 50, 51, 52, 53, 54]);
        let (a, b) = buf.split_at(4);
        assert_eq!((a.len(), b.len()), (4, 6));
        for (i, chunk) in buf.chunks_mut(4).enumerate() {
            chunk.fill(i as u32)?;
        }
        assert_eq!(buf.to_vec()?, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
        let lens: Vec<usize> = buf.chunks(3).map(|c| c.len()).collect();
        assert_eq!(lens, [3, 3, 3, 1]);
        assert!(buf.get(5..11).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 7..3;
        assert!(buf.get(reversed).is_none());
        assert_eq!(buf.get(10..).map(|v| v.len()), Some(0));
        Ok(())
    });
}

fn panic_message(f: impl FnOnce()) -> String {
    let payload = panic::catch_unwind(AssertUnwindSafe(f)).expect_err("should panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn bad_lengths_are_errors_and_bad_ranges_panic_clearly_before_the_driver() {
    common::in_context(|ctx| {
        let mut buf = DeviceBuffer::<u32>::zeroed(ctx, 4)?;
        let e = buf.copy_from_host(&[1, 2, 3]).unwrap_err();
        assert_eq!(
            (e.call(), e.invalid()),
            (
                "copy_from_host",
                Some(&cuda_brand::Invalid::LengthMismatch {
                    expected: 4,
                    found: 3
                })
            )
        );
        let e = buf.copy_to_host(&mut [0; 5]).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&cuda_brand::Invalid::LengthMismatch {
                expected: 5,
                found: 4
            })
        );
        let msg = panic_message(|| {
            let _ = &buf[2..9];
        });
        assert_eq!(
            msg,
            "DeviceSlice: range out of bounds for a view of 4 elements"
        );
        let msg = panic_message(|| {
            let _ = buf.split_at(5);
        });
        assert_eq!(
            msg,
            "DeviceSlice::split_at: the range 5..5 is out of bounds for length 4"
        );
        // nothing above reached the driver: the buffer is intact
        assert_eq!(buf.to_vec()?, [0; 4]);
        Ok(())
    });
}

fn pinned_memory_is_zeroed_and_a_host_slice() {
    common::in_context(|ctx| {
        let mut pinned = PinnedBuffer::<u64>::zeroed(ctx, 1000)?;
        assert!(pinned.iter().all(|&x| x == 0));
        pinned[999] = 42;
        pinned[..3].copy_from_slice(&[1, 2, 3]);
        let buf = DeviceBuffer::from_slice(ctx, &pinned)?;
        let back = buf.to_vec()?;
        assert_eq!(&back[..3], &[1, 2, 3]);
        assert_eq!(back[999], 42);
        let p2 = PinnedBuffer::from_slice(ctx, &[1.5f32, 2.5])?;
        assert_eq!(&p2[..], &[1.5, 2.5]);
        Ok(())
    });
}

fn buffers_work_and_drop_on_a_scoped_thread_without_a_current_context() {
    common::in_context(|ctx| {
        let buf = DeviceBuffer::from_slice(ctx, &[3u16; 100])?;
        let pinned = PinnedBuffer::from_slice(ctx, &[9u8; 10])?;
        std::thread::scope(|s| {
            s.spawn(move || {
                assert!(common::current().is_null());
                // (no driver error on the way: the crate sees that nothing is current)
                // no `enter`: synchronous operations fall back to the memory's own context
                assert_eq!(buf.to_vec().unwrap(), vec![3u16; 100]);
                drop(buf);
                drop(pinned);
                assert!(common::current().is_null());
            });
        });
        Ok(())
    });
}

fn buffers_of_an_outer_context_work_inside_a_nested_one() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |outer| {
        let mut kept = DeviceBuffer::from_slice(outer, &[1i32, 2, 3])?;
        with_context(&device, ContextFlags::default(), |inner| {
            // allocated with the outer guard while the inner context is current: memory of
            // the crate's pool of the device (tied to no context), freed by the outer one
            let made = DeviceBuffer::<i32>::zeroed(outer, 3)?;
            let mut owner: cuda_brand::sys::CUcontext = std::ptr::null_mut();
            // SAFETY: only given to the driver's attribute queries while `made` is alive.
            let address = unsafe { made.as_device_ptr() };
            // SAFETY: a live device pointer; the out-pointer has the attribute's type.
            let rc = unsafe {
                (common::driver().cuPointerGetAttribute)(
                    (&mut owner as *mut cuda_brand::sys::CUcontext).cast(),
                    1, // CU_POINTER_ATTRIBUTE_CONTEXT
                    address,
                )
            };
            assert_eq!(rc, 0);
            assert!(owner.is_null(), "pool memory belongs to no context");
            assert_ne!(common::mempool_of(address), 0, "from a pool");
            assert_eq!(made.to_vec()?, [0, 0, 0]);
            let _ = inner;
            kept.fill(7)?;
            assert_eq!(kept.to_vec()?, [7, 7, 7]);
            assert_eq!(
                common::current(),
                common::handle(inner),
                "still the inner context"
            );
            Ok::<_, Error>(())
        })
    })
    .unwrap();
}

fn a_pool_of_ones_own_serves_buffers_and_scopes_with_its_settings() {
    use cuda_brand::{MemoryPool, ReusePolicy};
    common::skip_under_sanitizer("an exhausted pool");
    common::in_context(|ctx| {
        let pool = MemoryPool::new(ctx)?;
        // SAFETY: only compared with what the driver says a pointer's pool is.
        let raw_pool = unsafe { pool.as_raw() } as usize;
        assert_eq!(pool.release_threshold()?, 0, "the driver's default");
        pool.set_release_threshold(32 << 20)?;
        assert_eq!(pool.release_threshold()?, 32 << 20);
        assert_eq!(pool.reuse_policy()?, ReusePolicy::default());
        let strict = ReusePolicy {
            follow_event_dependencies: false,
            allow_opportunistic: true,
            allow_internal_dependencies: false,
        };
        pool.set_reuse_policy(strict)?;
        assert_eq!(pool.reuse_policy()?, strict);
        let buf = DeviceBuffer::from_slice_in(ctx, &pool, &[5u32; 1000])?;
        // SAFETY: only queried while `buf` is alive.
        assert_eq!(common::mempool_of(unsafe { buf.as_device_ptr() }), raw_pool);
        assert_eq!(buf.to_vec()?, vec![5; 1000]);
        let mut back = vec![0u32; 1000];
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            let scratch = s.alloc_zeroed_in::<u32>(&pool, 1000)?;
            // SAFETY: only queried while the scope holds `scratch`.
            assert_eq!(
                common::mempool_of(unsafe { scratch.as_device_ptr() }),
                raw_pool
            );
            s.copy_from_device(scratch, &buf)?;
            s.copy_to_host(&mut back, scratch.into_ref())
        })?;
        assert_eq!(back, vec![5; 1000]);
        assert!(pool.used_high_watermark()? >= 8000);
        drop(buf);
        ctx.synchronize()?;
        assert_eq!(pool.used_bytes()?, 0);
        pool.trim_to(0)?;
        pool.reset_high_watermarks()?;
        assert_eq!(pool.used_high_watermark()?, 0);
        // a bounded pool: allocations beyond its size fail cleanly (CUDA 12.2 drivers on)
        if cuda_brand::driver_version()? >= 12020 {
            let arena = MemoryPool::with_max_size(ctx, 64 << 20)?;
            let a = DeviceBuffer::<u8>::zeroed_in(ctx, &arena, 40 << 20)?;
            let second = DeviceBuffer::<u8>::zeroed_in(ctx, &arena, 40 << 20);
            let reserved = arena.reserved_bytes()?;
            let e = second.map(drop).unwrap_err();
            assert_eq!(
                e.code(),
                ErrorCode::OutOfMemory,
                "{e} ({reserved} bytes reserved)"
            );
            drop(a);
        }
        let default = MemoryPool::device_default(ctx)?;
        // SAFETY: only compared with null.
        assert!(!unsafe { default.as_raw() }.is_null());
        let cuda_brand::MemoryInfo { free, total } = ctx.memory_info()?;
        assert!(free > 0 && free <= total);
        assert_eq!(total, ctx.device()?.total_memory()?);
        Ok(())
    });
}

fn pitched_2d_buffers_copy_windows_of_host_images_both_ways() {
    use cuda_brand::DeviceBuffer2D;
    common::in_context(|ctx| {
        // a 7-wide, 5-tall host image; the buffer takes a 4 x 3 window of it
        let image: Vec<u16> = (0..35).collect();
        let mut tile = DeviceBuffer2D::<u16>::zeroed(ctx, 4, 3)?;
        assert!(tile.pitch_bytes() >= 8, "pitch {}", tile.pitch_bytes());
        assert_eq!(tile.to_vec()?, vec![0; 12], "zeroed");
        tile.copy_from_host(&image, 7)?;
        assert_eq!(tile.to_vec()?, [0, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 17]);
        // back into a 10-wide canvas: only the window's cells change
        let mut canvas = vec![u16::MAX; 30];
        tile.copy_to_host(&mut canvas, 10)?;
        for (i, &x) in canvas.iter().enumerate() {
            let (row, col) = (i / 10, i % 10);
            let want = if col < 4 {
                (row * 7 + col) as u16
            } else {
                u16::MAX
            };
            assert_eq!(x, want, "canvas cell {i}");
        }
        let mut copy = DeviceBuffer2D::<u16>::zeroed(ctx, 4, 3)?;
        copy.copy_from_device(&tile)?;
        assert_eq!(copy.to_vec()?, tile.to_vec()?);
        // the same through a stream scope
        let mut back = vec![0u16; 12];
        let shifted: Vec<u16> = (100..135).collect();
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // (a scope borrows what it writes for its whole length: write in one, read in the next)
        stream.scope(|s| s.copy_2d_from_host(&mut copy, &shifted, 7))?;
        stream.scope(|s| s.copy_2d_to_host(&mut back, 4, &copy))?;
        assert_eq!(
            back,
            [100, 101, 102, 103, 107, 108, 109, 110, 114, 115, 116, 117]
        );
        // a host slice too short for the rows: refused before the driver
        let e = tile.copy_from_host(&image[..15], 7).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&cuda_brand::Invalid::OutOfBounds {
                start: 0,
                end: 18,
                len: 15
            })
        );
        Ok(())
    });
}

/// A 2D buffer of zero-sized elements whose element count does not fit a `usize`:
/// `to_vec` is an error naming the shape, not an overflow (a panic in debug builds, a
/// wrapped length in release ones); a shape that fits gives that many elements.
fn a_2d_buffer_of_zero_sized_elements_too_many_to_count_is_an_error_in_to_vec() {
    use cuda_brand::DeviceBuffer2D;
    common::in_context(|ctx| {
        let huge = DeviceBuffer2D::<[u32; 0]>::zeroed(ctx, usize::MAX, 2)?;
        let e = huge.to_vec().unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput, "{e}");
        assert!(
            matches!(e.invalid(), Some(cuda_brand::Invalid::TooLarge { .. })),
            "{e}"
        );
        let fits = DeviceBuffer2D::<[u32; 0]>::zeroed(ctx, usize::MAX / 2, 2)?;
        assert_eq!(fits.to_vec()?.len(), usize::MAX / 2 * 2);
        Ok(())
    });
}

fn pitched_3d_buffers_copy_volumes_and_boxes_both_ways() {
    use cuda_brand::{DeviceBuffer3D, Region3D};
    common::in_context(|ctx| {
        // a host volume 7 wide, 5 rows per slice, 3 slices: element (x, y, z) is `at(x, y, z)`
        let host: Vec<u16> = (0..105).collect();
        let at = |x: usize, y: usize, z: usize| (z * 35 + y * 7 + x) as u16;
        let mut vol = DeviceBuffer3D::<u16>::zeroed(ctx, 4, 3, 2)?;
        assert_eq!(vol.shape(), [4, 3, 2]);
        assert!(vol.pitch_bytes() >= 8, "pitch {}", vol.pitch_bytes());
        assert_eq!(vol.to_vec()?, vec![0; 24], "zeroed");
        // the 4 x 3 x 2 window of it at its first element
        vol.copy_from_host(&host, 7, 5)?;
        let window: Vec<u16> = (0..2)
            .flat_map(|z| (0..3).flat_map(move |y| (0..4).map(move |x| at(x, y, z))))
            .collect();
        assert_eq!(window[..5], [0, 1, 2, 3, 7]);
        assert_eq!(window[12], 35, "the second slice starts 5 host rows on");
        assert_eq!(vol.to_vec()?, window);
        // into a canvas 10 wide, 4 rows per slice: only the window's cells change
        let mut canvas = vec![u16::MAX; 80];
        vol.copy_to_host(&mut canvas, 10, 4)?;
        for (i, &v) in canvas.iter().enumerate() {
            let (z, y, x) = (i / 40, i % 40 / 10, i % 10);
            let want = if x < 4 && y < 3 {
                at(x, y, z)
            } else {
                u16::MAX
            };
            assert_eq!(v, want, "canvas cell {i} (x {x}, y {y}, z {z})");
        }
        let mut copy = DeviceBuffer3D::<u16>::zeroed(ctx, 4, 3, 2)?;
        copy.copy_from_device(&vol)?;
        assert_eq!(copy.to_vec()?, window);

        // boxes: 2 x 2 x 1 of `vol` at (2, 1, 1) into a 3 x 2 x 2 buffer at (1, 0, 1);
        // packed, element (x, y, z) of `small` is at z * 6 + y * 3 + x
        let mut small = DeviceBuffer3D::<u16>::zeroed(ctx, 3, 2, 2)?;
        small
            .region_mut(Region3D::new([1, 0, 1], [2, 2, 1]))
            .copy_from_device(vol.region(Region3D::new([2, 1, 1], [2, 2, 1])))?;
        let mut want = vec![0u16; 12];
        (want[7], want[8], want[10], want[11]) =
            (at(2, 1, 1), at(3, 1, 1), at(2, 2, 1), at(3, 2, 1));
        assert_eq!(small.to_vec()?, want);
        // a packed 2 x 1 x 2 host volume into the box at (0, 1, 0)
        small
            .region_mut(Region3D::new([0, 1, 0], [2, 1, 2]))
            .copy_from_host(&[100, 101, 102, 103], 2, 1)?;
        (want[3], want[4], want[9], want[10]) = (100, 101, 102, 103);
        assert_eq!(small.to_vec()?, want);
        // the box at (1, 0, 1) of 2 x 2 x 1 back into a 3-wide host image
        let mut out = [u16::MAX; 6];
        small
            .region(Region3D::new([1, 0, 1], [2, 2, 1]))
            .copy_to_host(&mut out, 3, 2)?;
        assert_eq!(
            out,
            [want[7], want[8], u16::MAX, want[10], want[11], u16::MAX]
        );
        // an empty box at the far corner: checked, then nothing to do
        small
            .region_mut(Region3D::new([3, 2, 2], [0, 0, 0]))
            .copy_from_device(vol.region(Region3D::new([4, 3, 2], [0, 0, 0])))?;
        assert_eq!(small.to_vec()?, want);

        // the same copies queued in stream scopes (`cuMemcpy3DAsync`); a scope borrows what
        // it writes for its whole length: write in one, read in the next
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let shifted: Vec<u16> = host.iter().map(|v| v + 1000).collect();
        let shifted_window: Vec<u16> = window.iter().map(|v| v + 1000).collect();
        stream.scope(|s| s.copy_3d_from_host(&mut copy, &shifted, 7, 5))?;
        let mut back = vec![0u16; 24];
        stream.scope(|s| s.copy_3d_to_host(&mut back, 4, 3, &copy))?;
        assert_eq!(back, shifted_window);
        stream.scope(|s| s.copy_3d_from_device(&mut vol, &copy))?;
        assert_eq!(vol.to_vec()?, shifted_window);
        let mut tile = DeviceBuffer3D::<u16>::zeroed(ctx, 2, 2, 1)?;
        let box_at_111 = Region3D::new([1, 1, 1], [2, 2, 1]);
        stream.scope(|s| s.copy_3d_from_device(&mut tile, vol.region(box_at_111)))?;
        let mut tile_host = [0u16; 4];
        stream.scope(|s| s.copy_3d_to_host(&mut tile_host, 2, 2, &tile))?;
        assert_eq!(
            tile_host,
            [at(1, 1, 1), at(2, 1, 1), at(1, 2, 1), at(2, 2, 1)].map(|v| v + 1000)
        );
        let mut other = DeviceBuffer3D::<u16>::zeroed(ctx, 4, 3, 2)?;
        let middle = Region3D::new([1, 1, 0], [2, 2, 1]);
        stream.scope(|s| s.copy_3d_from_host(other.region_mut(middle), &[1, 2, 3, 4], 2, 2))?;
        let mut other_want = vec![0u16; 24];
        (other_want[5], other_want[6], other_want[9], other_want[10]) = (1, 2, 3, 4);
        assert_eq!(other.to_vec()?, other_want);
        let mut image = [u16::MAX; 6];
        stream.scope(|s| s.copy_3d_to_host(&mut image, 3, 2, other.region(middle)))?;
        assert_eq!(image, [1, 2, u16::MAX, 3, 4, u16::MAX]);

        // bad shapes are refused before the driver: the buffers are unchanged
        let message = |r: Result<(), Error>| {
            let e = r.unwrap_err();
            format!("{}: {}", e.call(), e.invalid().unwrap())
        };
        assert_eq!(
            message(vol.copy_from_host(&host[..20], 7, 5)),
            "DeviceBuffer3D::copy_from_host: the range 0..53 is out of bounds for length 20"
        );
        assert_eq!(
            message(
                vol.region_mut(Region3D::new([3, 0, 0], [2, 1, 1]))
                    .copy_from_device(copy.region(Region3D::new([0, 0, 0], [2, 1, 1])))
            ),
            "Part3DMut::copy_from_device: the destination region (origin [3, 0, 0], \
             extent [2, 1, 1]) is not inside the buffer's shape [4, 3, 2]"
        );
        assert_eq!(
            message(stream.scope(|s| s.copy_3d_to_host(&mut back, 4, 2, &vol))),
            "copy_3d_to_host: a host slice of 2 rows is shorter than the 3 rows copied per slice"
        );
        assert_eq!(vol.to_vec()?, shifted_window);
        Ok(())
    });
}

fn a_3d_volume_wider_than_the_pitch_alignment_round_trips_exactly() {
    use cuda_brand::DeviceBuffer3D;
    common::in_context(|ctx| {
        let (w, h, d) = (333, 17, 5);
        let host: Vec<f32> = (0..w * h * d).map(|i| i as f32 * 0.5 - 7.0).collect();
        let mut vol = DeviceBuffer3D::<f32>::zeroed(ctx, w, h, d)?;
        assert!(vol.pitch_bytes() >= w * 4, "pitch {}", vol.pitch_bytes());
        vol.copy_from_host(&host, w, h)?;
        let back = vol.to_vec()?;
        assert!(
            back == host,
            "first mismatch at {:?}",
            back.iter().zip(&host).position(|(a, b)| a != b)
        );
        // into a padded host volume: rows 340 apart, slices 20 rows apart
        let (row_len, slice_rows) = (340, 20);
        let mut padded = vec![f32::NAN; row_len * slice_rows * d];
        let mut other = DeviceBuffer3D::<f32>::zeroed(ctx, w, h, d)?;
        let streams = (
            Stream::new(ctx, StreamFlags::NonBlocking)?,
            ctx.new_stream()?,
        );
        // two streams of one scope: one downloads `vol`, the other uploads into `other`
        streams.0.scope_pair(&streams.1, |a, b| {
            a.copy_3d_to_host(&mut padded, row_len, slice_rows, &vol)?;
            b.copy_3d_from_host(&mut other, &host, w, h)
        })?;
        for z in 0..d {
            for y in 0..slice_rows {
                for x in 0..row_len {
                    let got = padded[(z * slice_rows + y) * row_len + x];
                    if x < w && y < h {
                        assert_eq!(got, host[(z * h + y) * w + x], "({x}, {y}, {z})");
                    } else {
                        assert!(got.is_nan(), "padding at ({x}, {y}, {z}) written: {got}");
                    }
                }
            }
        }
        assert!(other.to_vec()? == host, "uploaded on the second stream");
        Ok(())
    });
}

fn a_scope_copy_takes_the_destination_first_and_leaves_the_source_as_it_was() {
    common::in_context(|ctx| {
        let mut a = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3, 4])?;
        let mut b = DeviceBuffer::from_slice(ctx, &[9u32, 9, 9, 9])?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // two bound views of one type: the source converted explicitly, the destination first
        stream.scope(|s| {
            let (src, dst) = (s.bind_mut(&mut a), s.bind_mut(&mut b));
            s.fill(src.slice(3..), 40)?;
            s.copy_from_device(dst, src.into_ref())?;
            s.fill(src.slice(..1), 10) // `src` is `Copy`: still writable after `into_ref`
        })?;
        assert_eq!(
            b.to_vec()?,
            [1, 2, 3, 40],
            "the destination holds the source's values"
        );
        assert_eq!(
            a.to_vec()?,
            [10, 2, 3, 40],
            "the source was only read by the copy"
        );
        // plain borrows, and a part of each
        stream.scope(|s| s.copy_from_device(&mut a[..2], &b[2..]))?;
        assert_eq!(a.to_vec()?, [3, 40, 3, 40]);
        assert_eq!(b.to_vec()?, [1, 2, 3, 40]);
        // the lengths' error: the destination's `expected`, the source's `found`
        let e = stream
            .scope(|s| s.copy_from_device(&mut a[..3], &b))
            .unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&cuda_brand::Invalid::LengthMismatch {
                expected: 3,
                found: 4
            })
        );
        Ok(())
    });
}

/// `copy_from_peer` with the scope's own guard as the source's and two overlapping views of
/// one bound buffer (a bound view is `Copy`): refused before the driver, as
/// `copy_from_device` refuses it, and nothing is queued. (Found by the review of the 0.2
/// API: the peer copy had no overlap check.)
fn a_peer_copy_whose_source_overlaps_its_destination_is_refused_before_the_driver() {
    common::in_context(|ctx| {
        let start: Vec<f32> = (0..64).map(|i| i as f32).collect();
        let mut b = ctx.from_slice(&start)?;
        let stream = ctx.new_stream()?;
        let e = stream
            .scope(|s| {
                let d = s.bind_mut(&mut b);
                // b[16..48] into b[0..32]: b[16..32] is both source and destination
                s.copy_from_peer(d.slice(..32), d.slice(16..48).into_ref(), ctx)
            })
            .unwrap_err();
        assert_eq!(e.call(), "StreamScope::copy_from_peer", "{e}");
        assert!(
            matches!(e.invalid(), Some(cuda_brand::Invalid::Overlap { .. })),
            "{e}"
        );
        // nothing was queued: the buffer is as it was
        assert_eq!(b.to_vec()?, start);
        Ok(())
    })
}

fn a_3d_copy_between_boxes_copies_the_source_box_into_the_destination_box() {
    use cuda_brand::{DeviceBuffer3D, Invalid, Region3D};
    common::in_context(|ctx| {
        // a packed 4 x 3 x 2 volume: element (x, y, z) is z * 12 + y * 4 + x
        let host: Vec<u32> = (0..24).collect();
        let mut a = DeviceBuffer3D::<u32>::zeroed(ctx, 4, 3, 2)?;
        a.copy_from_host(&host, 4, 3)?;
        let mut b = DeviceBuffer3D::<u32>::zeroed(ctx, 3, 3, 1)?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        // the 2 x 2 x 1 box of `a` at (1, 1, 1) into the box of `b` at (1, 0, 0)
        let (into, from) = (
            Region3D::new([1, 0, 0], [2, 2, 1]),
            Region3D::new([1, 1, 1], [2, 2, 1]),
        );
        stream.scope(|s| s.copy_3d_from_device(b.region_mut(into), a.region(from)))?;
        assert_eq!(b.to_vec()?, [0, 17, 18, 0, 21, 22, 0, 0, 0]);
        assert_eq!(a.to_vec()?, host, "the source is unchanged");
        // the same box synchronously, and back to the host through a `Part3D`
        let mut c = DeviceBuffer3D::<u32>::zeroed(ctx, 2, 2, 1)?;
        c.copy_from_device(a.region(from))?;
        let mut out = [0u32; 4];
        stream.scope(|s| s.copy_3d_to_host(&mut out, 2, 2, b.region(into)))?;
        assert_eq!(out, [17, 18, 21, 22]);
        assert_eq!(c.to_vec()?, out);
        // all of `c` (2 x 2 x 1) into the box of that extent at (0, 1, 0) of `b`
        stream.scope(|s| {
            s.copy_3d_from_device(b.region_mut(Region3D::new([0, 1, 0], [2, 2, 1])), &c)
        })?;
        assert_eq!(b.to_vec()?, [0, 17, 18, 17, 18, 22, 21, 22, 0]);
        // boxes of two extents: the destination's `expected`, the source's `found`
        let e = b
            .region_mut(Region3D::new([0, 0, 0], [3, 1, 1]))
            .copy_from_device(&c)
            .unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&Invalid::ShapeMismatch {
                expected: [3, 1, 1],
                found: [2, 2, 1]
            })
        );
        assert_eq!(e.call(), "Part3DMut::copy_from_device");
        assert_eq!(
            b.to_vec()?,
            [0, 17, 18, 17, 18, 22, 21, 22, 0],
            "refused: unchanged"
        );
        Ok(())
    });
}

fn empty_3d_buffers_allocate_nothing_and_copy_nothing() {
    use cuda_brand::{DeviceBuffer3D, Region3D};
    common::in_context(|ctx| {
        for [w, h, d] in [[0, 3, 2], [4, 0, 2], [4, 3, 0]] {
            let mut empty = DeviceBuffer3D::<u32>::zeroed(ctx, w, h, d)?;
            assert_eq!(
                // SAFETY: only compared.
                unsafe { empty.as_device_ptr() },
                256,
                "the sentinel address, not an allocation"
            );
            assert_eq!(empty.to_vec()?, Vec::<u32>::new());
            empty.copy_from_host(&[], w, h)?;
            empty.copy_to_host(&mut [], w, h)?;
            let twin = DeviceBuffer3D::<u32>::zeroed(ctx, w, h, d)?;
            empty.copy_from_device(&twin)?;
            empty
                .region_mut(Region3D::whole([w, h, d]))
                .copy_from_device(twin.region(Region3D::whole([w, h, d])))?;
        }
        Ok(())
    });
}

fn managed_memory_is_seen_in_order_by_the_host_and_kernels() {
    use cuda_brand::{Advice, In, LaunchConfig, ManagedBuffer, MemoryLocation, Module, Out};
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t).
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let n = 1 << 20;
        let device = ctx.device()?;
        let mut data = match ManagedBuffer::<f32>::zeroed(ctx, n) {
            Ok(data) => data,
            Err(e) if e.code() == ErrorCode::NotSupported => {
                // a device without concurrent managed access: refused, as documented
                common::skip(format!("no concurrent managed access here ({e})"))
            }
            Err(e) => return Err(e),
        };
        for (i, x) in data.iter_mut().enumerate() {
            *x = i as f32; // the host writes first
        }
        data.advise(Advice::PreferredLocation(MemoryLocation::Device(device)))?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        stream.scope(|s| {
            let d = s.bind_mut(data.as_device_mut());
            s.prefetch(d.into_ref(), MemoryLocation::Device(device))?;
            let config = LaunchConfig::linear(256, 256);
            s.launch(&scale, config, (d, 2.0f32))?; // then the kernel, twice
            s.launch(&scale, config, (d, 3.0f32))?;
            s.prefetch(d.into_ref(), MemoryLocation::Host)
        })?;
        assert!(
            data.iter().enumerate().all(|(i, &x)| x == 6.0 * i as f32),
            "host sees both kernels"
        );
        data[7] = -1.0; // the host writes again; the next kernel must see it
        data.advise(Advice::ReadMostly)?;
        let other = ManagedBuffer::from_slice(ctx, &vec![1.0f32; n])?;
        let mut sum = ManagedBuffer::<f32>::zeroed(ctx, n)?;
        stream.scope(|s| {
            s.launch(
                &add,
                LaunchConfig::linear(256, 256),
                (data.as_device(), other.as_device(), sum.as_device_mut()),
            )
        })?;
        assert_eq!(sum[7], 0.0);
        assert_eq!(sum[8], 6.0 * 8.0 + 1.0);
        assert_eq!(
            sum.as_device().to_vec()?[9],
            6.0 * 9.0 + 1.0,
            "a synchronous copy of managed memory"
        );
        Ok(())
    });
}

// Adopting memory allocated elsewhere (`from_raw_parts`) and handing it out
// (`into_raw_parts`), for device, pinned and managed buffers.

/// The raw driver's allocation calls of the tests below, each asserting success, in the
/// current context.
mod raw {
    use super::common;
    use std::ffi::c_void;

    /// `cuMemAlloc` (what `cudaMalloc` calls).
    pub fn alloc(bytes: usize) -> u64 {
        let mut p = 0;
        // SAFETY: the out-pointer is a live local; a context is current.
        let rc = unsafe { (common::driver().cuMemAlloc_v2)(&mut p, bytes) };
        assert_eq!(rc, 0, "cuMemAlloc_v2");
        p
    }

    /// `cuMemFree` of memory no buffer owns.
    pub fn free(p: u64) {
        // SAFETY: memory of `alloc` (or of a pool, no work pending) that nothing owns.
        let rc = unsafe { (common::driver().cuMemFree_v2)(p) };
        assert_eq!(rc, 0, "cuMemFree_v2");
    }

    /// `cuMemAllocManaged` (`cudaMallocManaged`), `CU_MEM_ATTACH_GLOBAL`, zeroed by the host.
    pub fn alloc_managed(bytes: usize) -> u64 {
        let mut p = 0;
        // SAFETY: the out-pointer is a live local; a context is current.
        let rc = unsafe { (common::driver().cuMemAllocManaged)(&mut p, bytes, 1) };
        assert_eq!(rc, 0, "cuMemAllocManaged");
        // SAFETY: `bytes` of managed memory, host-accessible (the callers checked the
        // device's concurrent managed access), used by nothing else yet.
        unsafe { std::ptr::write_bytes(p as usize as *mut u8, 0, bytes) };
        p
    }

    /// `cuMemHostAlloc` with no flags (what `cudaMallocHost` calls), zeroed.
    pub fn alloc_host(bytes: usize) -> *mut c_void {
        let mut p = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local; a context is current.
        let rc = unsafe { (common::driver().cuMemHostAlloc)(&mut p, bytes, 0) };
        assert_eq!(rc, 0, "cuMemHostAlloc");
        // SAFETY: `bytes` of host memory just allocated.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        p
    }

    /// `cuMemFreeHost` of memory no buffer owns.
    pub fn free_host(p: *mut c_void) {
        // SAFETY: memory of `alloc_host` that nothing owns.
        let rc = unsafe { (common::driver().cuMemFreeHost)(p) };
        assert_eq!(rc, 0, "cuMemFreeHost");
    }

    /// `cuCtxSynchronize` of the current context.
    pub fn synchronize() {
        // SAFETY: no arguments; a context is current.
        let rc = unsafe { (common::driver().cuCtxSynchronize)() };
        assert_eq!(rc, 0, "cuCtxSynchronize");
    }

    /// The context and memory type the driver reports for `p` (`cuPointerGetAttributes`,
    /// which reports null and 0 for an address it does not know).
    pub fn owner_of(p: u64) -> (cuda_brand::sys::CUcontext, u32) {
        let mut context: cuda_brand::sys::CUcontext = std::ptr::null_mut();
        let mut memory_type: u32 = 0;
        let mut attributes = [1, 2]; // CU_POINTER_ATTRIBUTE_CONTEXT, _MEMORY_TYPE
        let mut data: [*mut c_void; 2] = [
            (&mut context as *mut cuda_brand::sys::CUcontext).cast(),
            (&mut memory_type as *mut u32).cast(),
        ];
        // SAFETY: two attributes, each with a live local of its size.
        let rc = unsafe {
            (common::driver().cuPointerGetAttributes)(
                2,
                attributes.as_mut_ptr(),
                data.as_mut_ptr(),
                p,
            )
        };
        assert_eq!(rc, 0, "cuPointerGetAttributes");
        (context, memory_type)
    }

    /// The size of the allocation containing `p` (`CU_POINTER_ATTRIBUTE_RANGE_SIZE`).
    pub fn range_size(p: u64) -> usize {
        let mut size: usize = 0;
        // SAFETY: the out-pointer is a live local of the attribute's size (a `size_t`).
        let rc = unsafe {
            (common::driver().cuPointerGetAttribute)((&mut size as *mut usize).cast(), 12, p)
        };
        assert_eq!(rc, 0, "cuPointerGetAttribute(RANGE_SIZE)");
        size
    }
}

/// After its buffer was closed, `p` is no memory of `ctx` any more: the driver knows no
/// memory there, or (another test allocated at the freed address meanwhile) memory of
/// another context.
fn assert_freed(ctx: ContextGuard<'_>, p: u64, what: &str) {
    let (context, memory_type) = raw::owner_of(p);
    assert!(
        memory_type == 0 || context != common::handle(ctx),
        "{what} at {p:#x} is still allocated in its context"
    );
}

/// Whether the device has concurrent managed access (else `ManagedBuffer` refuses it, as
/// documented, and the managed parts of a test are skipped with a notice).
fn managed_supported(ctx: ContextGuard<'_>) -> Result<bool, Error> {
    match cuda_brand::ManagedBuffer::<u8>::zeroed(ctx, 0) {
        Ok(_) => Ok(true),
        Err(e) if e.code() == ErrorCode::NotSupported => {
            println!("managed memory refused here: {e}");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The error of a refused adoption, asserting its call and that its message names each of
/// `names`; an adoption that was accepted fails the test (its buffer forgotten, so that
/// the memory's owner still frees it once).
#[track_caller]
fn refused<B>(adopted: Result<B, Error>, call: &str, names: &[&str]) -> Error {
    let e = match adopted {
        Ok(buffer) => {
            std::mem::forget(buffer);
            panic!("{call} accepted what it should refuse ({names:?})");
        }
        Err(e) => e,
    };
    assert_eq!(e.call(), call, "{e}");
    let text = e.to_string();
    for name in names {
        assert!(text.contains(name), "{text:?} does not say {name:?}");
    }
    e
}

/// `ManagedBuffer::from_raw_parts` adopts managed memory only from the start of its
/// allocation (`cuMemFree` frees nothing else: a buffer given an interior pointer would fail
/// its free and leak the allocation), and no more of it than the allocation holds. Each
/// refusal leaves the memory to the test, which frees the allocation itself at the end
/// (`cuMemFree` succeeds: nothing freed it before, and compute-sanitizer's leak check finds
/// nothing left).
fn a_managed_pointer_inside_its_allocation_is_refused_and_its_start_accepted() {
    use cuda_brand::ManagedBuffer;
    const MANAGED: &str = "ManagedBuffer::from_raw_parts";
    common::in_context(|ctx| {
        if !managed_supported(ctx)? {
            common::skip("managed memory is refused on this device");
        }
        let m = raw::alloc_managed(1 << 16);
        let size = raw::range_size(m);
        assert!(size >= 1 << 16, "the driver reports the allocation's range");
        // SAFETY (every call below): refused before anything is taken over, or (accepted)
        // managed memory of this context, zeroed, given over and taken back at once.
        unsafe {
            for interior in [m + 256, m + 4, m + (1 << 15)] {
                let e = refused(
                    ManagedBuffer::<u32>::from_raw_parts(ctx, interior, 4),
                    MANAGED,
                    &["`ptr`", "inside an allocation that starts at", "cuMemFree"],
                );
                assert_eq!(e.code(), ErrorCode::InvalidInput);
            }
            // from the start: a part, and the whole
            let part = ManagedBuffer::<u32>::from_raw_parts(ctx, m, 4)?;
            assert_eq!(&part[..], [0; 4]);
            assert_eq!(
                part.into_raw_parts(),
                (m, 4),
                "a part from the start is accepted"
            );
            let whole = ManagedBuffer::<u32>::from_raw_parts(ctx, m, size / 4)?;
            assert_eq!(
                whole.into_raw_parts(),
                (m, size / 4),
                "the whole is accepted"
            );
            refused(
                ManagedBuffer::<u32>::from_raw_parts(ctx, m, size / 4 + 1),
                MANAGED,
                &["`len`", "passes the end of the allocation"],
            );
        }
        raw::free(m);
        Ok(())
    });
}

fn buffers_round_trip_through_raw_parts() {
    use cuda_brand::ManagedBuffer;
    common::in_context(|ctx| {
        let host: Vec<u32> = (0..1000u32).map(|i| i * 7 + 1).collect();

        let buf = DeviceBuffer::from_slice(ctx, &host)?;
        // SAFETY: only compared.
        let address = unsafe { buf.as_device_ptr() };
        // SAFETY: taken back below; nothing uses the memory meanwhile.
        let (ptr, len) = unsafe { buf.into_raw_parts() };
        assert_eq!((ptr, len), (address, 1000));
        // SAFETY: `into_raw_parts` of this context gave `ptr` and `len`; nothing else frees
        // or uses the memory.
        let back = unsafe { DeviceBuffer::<u32>::from_raw_parts(ctx, ptr, len) }?;
        // SAFETY: only compared.
        assert_eq!(
            unsafe { back.as_device_ptr() },
            ptr,
            "the same memory, not a copy"
        );
        assert_eq!(back.to_vec()?, host);
        back.close()?; // the free (cuMemFreeAsync of pool memory, or cuMemFree) succeeded

        let pinned = PinnedBuffer::from_slice(ctx, &host)?;
        // SAFETY: taken back below; nothing uses the memory meanwhile.
        let (p, n) = unsafe { pinned.into_raw_parts() };
        // SAFETY: `into_raw_parts` of this context gave `p` and `n`: initialised, freed by
        // nothing else, used by no copy.
        let mut back = unsafe { PinnedBuffer::<u32>::from_raw_parts(ctx, p, n) }?;
        assert_eq!(back.as_ptr(), p.cast_const(), "the same memory, not a copy");
        assert_eq!(&back[..], &host[..]);
        back[3] = 5;
        assert_eq!(
            DeviceBuffer::from_slice(ctx, &back)?.to_vec()?[..4],
            [1, 8, 15, 5]
        );
        back.close()?;

        if managed_supported(ctx)? {
            let managed = ManagedBuffer::from_slice(ctx, &host)?;
            // SAFETY: taken back below; nothing uses the memory meanwhile.
            let (p, n) = unsafe { managed.into_raw_parts() };
            // SAFETY: `into_raw_parts` of this context gave `p` and `n`: initialised, freed
            // by nothing else, used by no kernel.
            let mut back = unsafe { ManagedBuffer::<u32>::from_raw_parts(ctx, p, n) }?;
            // SAFETY: only compared.
            assert_eq!(unsafe { back.as_device().as_device_ptr() }, p);
            assert_eq!(&back[..], &host[..]);
            back[999] = 0;
            assert_eq!(back.as_device().to_vec()?[998..], [6987, 0]);
            back.close()?;
        }

        // empty buffers own nothing: their address is the sentinel, whatever was given
        let empty = ctx.zeroed::<u32>(0)?;
        // SAFETY: an empty buffer owns no memory.
        let (p0, n0) = unsafe { empty.into_raw_parts() };
        assert_eq!((p0, n0), (256, 0));
        for given in [0, p0] {
            // SAFETY: zero bytes: nothing is taken over.
            let e = unsafe { DeviceBuffer::<u32>::from_raw_parts(ctx, given, 0) }?;
            assert!(e.is_empty());
            // SAFETY: only compared.
            assert_eq!(unsafe { e.as_device_ptr() }, 256);
            assert_eq!(e.to_vec()?, Vec::<u32>::new());
        }
        // zero bytes of real memory: taken over by nobody, so its owner still frees it
        let real = raw::alloc(64);
        // SAFETY: zero bytes: nothing is taken over.
        drop(unsafe { DeviceBuffer::<u32>::from_raw_parts(ctx, real, 0) }?);
        raw::free(real);
        Ok(())
    });
}

fn pool_memory_handed_out_is_adopted_by_another_context_of_its_device() {
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |a| {
        let buf = DeviceBuffer::from_slice(a, &[1u64, 2, 3])?;
        // SAFETY: taken back below, in one context or the other; unused meanwhile.
        let (ptr, len) = unsafe { buf.into_raw_parts() };
        let pool = common::mempool_of(ptr) != 0;
        let in_b = with_context(&device, ContextFlags::default(), |b| {
            // SAFETY: `into_raw_parts` gave `ptr` and `len`; nothing else frees or uses the
            // memory; pool memory is tied to no context (plain memory is refused here).
            match unsafe { DeviceBuffer::<u64>::from_raw_parts(b, ptr, len) } {
                Ok(moved) => {
                    assert!(pool, "memory of no pool adopted by another context");
                    assert_eq!(moved.to_vec()?, [1, 2, 3]);
                    moved.close()?;
                    Ok(true)
                }
                Err(e) => {
                    assert!(!pool, "pool memory refused by a context of its device: {e}");
                    assert!(
                        matches!(e.invalid(), Some(cuda_brand::Invalid::WrongContext { .. })),
                        "{e}"
                    );
                    Ok(false)
                }
            }
        })?;
        if !in_b {
            println!("no memory pools here: plain memory stays with its context");
            // SAFETY: as above, in its own context.
            let back = unsafe { DeviceBuffer::<u64>::from_raw_parts(a, ptr, len) }?;
            assert_eq!(back.to_vec()?, [1, 2, 3]);
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// Holds a stream of "another library" for 300 ms, as a long kernel would.
unsafe extern "C" fn hold_the_stream(_: *mut std::ffi::c_void) {
    std::thread::sleep(std::time::Duration::from_millis(300));
}

/// A buffer from the device's default pool, which other libraries share, is valid for
/// every stream when it is made: "another library" (raw driver calls, as cudarc's safe
/// allocations do) queues a late write into default-pool memory on its own non-blocking
/// stream and frees it in that stream's order; the driver may hand the block to the
/// crate's next allocation from that pool while the write is still queued, ordering only
/// the allocating (legacy) stream after it. `zeroed_in` waits for the legacy stream, so
/// its zeros come after the other library's write, and stay (review of issue 28's ninth
/// step: the zeroing on the thread's sync stream used to run before it).
fn a_default_pool_buffer_is_ordered_after_another_librarys_pending_work() {
    const N: usize = 1 << 20;
    let d = common::driver();
    common::in_context(|ctx| {
        let mut theirs: cuda_brand::sys::CUstream = std::ptr::null_mut();
        let mut p: cuda_brand::sys::CUdeviceptr = 0;
        // SAFETY (the other library's side, raw calls): a new non-blocking stream of the
        // current context; memory of the default pool used and freed in its order; the host
        // function touches nothing.
        unsafe {
            assert_eq!((d.cuStreamCreate)(&mut theirs, 1), 0);
            assert_eq!((d.cuMemAllocAsync)(&mut p, N * 4, theirs), 0);
            assert_eq!(
                (d.cuLaunchHostFunc)(theirs, hold_the_stream, std::ptr::null_mut()),
                0
            );
            assert_eq!((d.cuMemsetD32Async)(p, 0xdead_beef, N, theirs), 0);
            assert_eq!((d.cuMemFreeAsync)(p, theirs), 0);
        }
        let pool = cuda_brand::MemoryPool::device_default(ctx)?;
        let buf = DeviceBuffer::<u32>::zeroed_in(ctx, &pool, N)?;
        // SAFETY: the address is only compared, never used.
        let reused = unsafe { buf.as_device_ptr() } == p;
        // SAFETY: the other library's stream, waited for and destroyed by it.
        unsafe {
            assert_eq!((d.cuStreamSynchronize)(theirs), 0);
            assert_eq!((d.cuStreamDestroy_v2)(theirs), 0);
        }
        let foreign = buf.to_vec()?.iter().filter(|&&x| x != 0).count();
        assert_eq!(
            foreign, 0,
            "elements of a zeroed buffer written after zeroed_in returned (block reused: {reused})"
        );
        Ok(())
    });
}

fn memory_of_raw_driver_calls_is_adopted_and_freed_by_its_buffer() {
    use cuda_brand::{ManagedBuffer, MemoryPool};
    common::in_context(|ctx| {
        let driver = common::driver();
        let n = 4096;
        let bytes = n * 4;
        let host: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();

        // cuMemAlloc, what cudaMalloc calls: freed with cuMemFree
        let p = raw::alloc(bytes);
        assert_eq!(common::mempool_of(p), 0);
        // SAFETY: allocated in this context just now, given over whole; no work uses it.
        let mut buf = unsafe { DeviceBuffer::<f32>::from_raw_parts(ctx, p, n) }?;
        buf.copy_from_host(&host)?;
        assert_eq!(buf.to_vec()?, host);
        buf.close()?;
        assert_freed(ctx, p, "cuMemAlloc memory");

        // cuMemAllocAsync on the legacy stream, what cudaMallocAsync calls: the device's
        // current pool, freed with cuMemFreeAsync
        let mut p = 0;
        // SAFETY: the out-pointer is a live local; the legacy stream of the current context.
        let rc = unsafe { (driver.cuMemAllocAsync)(&mut p, bytes, std::ptr::null_mut()) };
        if rc == 801 {
            println!(
                "no memory pools here (CUDA_ERROR_NOT_SUPPORTED): stream-ordered memory skipped"
            );
        } else {
            assert_eq!(rc, 0, "cuMemAllocAsync");
            raw::synchronize(); // the allocation has completed: valid for every stream
            assert_ne!(common::mempool_of(p), 0);
            // SAFETY: a completed allocation of this device's pool, given over; no work uses it.
            let mut buf = unsafe { DeviceBuffer::<f32>::from_raw_parts(ctx, p, n) }?;
            buf.copy_from_host(&host)?;
            assert_eq!(buf.to_vec()?, host);
            buf.close()?;

            // a pool of one's own: its used bytes go back to zero when the buffer is dropped
            let pool = MemoryPool::new(ctx)?;
            assert_eq!(pool.used_bytes()?, 0);
            let mut p = 0;
            // SAFETY: a live pool of this context's device; the out-pointer is a live local.
            let rc = unsafe {
                (driver.cuMemAllocFromPoolAsync)(&mut p, bytes, pool.as_raw(), std::ptr::null_mut())
            };
            assert_eq!(rc, 0, "cuMemAllocFromPoolAsync");
            raw::synchronize();
            assert!(pool.used_bytes()? >= bytes as u64);
            // SAFETY: a completed allocation of the pool, given over; no work uses it.
            let mut buf = unsafe { DeviceBuffer::<f32>::from_raw_parts(ctx, p, n) }?;
            buf.copy_from_host(&host)?;
            assert_eq!(buf.to_vec()?[n - 1], host[n - 1]);
            drop(buf);
            ctx.synchronize()?;
            assert_eq!(pool.used_bytes()?, 0, "the pool got its memory back");
        }

        // cuMemAllocManaged, what cudaMallocManaged calls: freed with cuMemFree
        if managed_supported(ctx)? {
            let p = raw::alloc_managed(bytes);
            // SAFETY: allocated in this context just now and zeroed, given over whole.
            let mut m = unsafe { ManagedBuffer::<f32>::from_raw_parts(ctx, p, n) }?;
            assert!(m.iter().all(|&x| x == 0.0));
            m.copy_from_slice(&host); // the host writes it
            assert_eq!(m.as_device().to_vec()?, host); // the device reads it
            m.close()?;
            assert_freed(ctx, p, "cuMemAllocManaged memory");
        }

        // cuMemHostAlloc, what cudaMallocHost calls: freed with cuMemFreeHost
        let h = raw::alloc_host(bytes);
        // SAFETY: allocated in this context just now and zeroed, given over whole.
        let mut pinned = unsafe { PinnedBuffer::<f32>::from_raw_parts(ctx, h.cast(), n) }?;
        assert!(pinned.iter().all(|&x| x == 0.0));
        pinned.copy_from_slice(&host);
        let dev = DeviceBuffer::from_slice(ctx, &pinned)?;
        assert_eq!(dev.to_vec()?, host);
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        pinned.fill(0.0);
        stream.scope(|s| s.copy_to_host(&mut pinned, &dev))?; // truly asynchronous
        assert_eq!(&pinned[..], &host[..]);
        pinned.close()?;
        assert_freed(ctx, h as u64, "cuMemHostAlloc memory");
        Ok(())
    });
}

fn bad_raw_parts_are_refused_naming_the_argument() {
    use cuda_brand::ManagedBuffer;
    let device = common::gpu();
    with_context(&device, ContextFlags::default(), |ctx| {
        const DEVICE: &str = "DeviceBuffer::from_raw_parts";
        const PINNED: &str = "PinnedBuffer::from_raw_parts";
        const MANAGED: &str = "ManagedBuffer::from_raw_parts";
        let p = raw::alloc(4096);
        let h = raw::alloc_host(4096);
        let on_the_heap = vec![0u32; 1024];
        let heap = on_the_heap.as_ptr() as u64;

        // SAFETY (every call below): refused before anything is taken over, or (the one
        // accepted) memory of this context given over whole and taken back at once.
        unsafe {
            // device memory
            refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, p + 2, 4),
                DEVICE,
                &["`ptr`", "not aligned"],
            );
            refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, 0, 4),
                DEVICE,
                &["`ptr` is null"],
            );
            refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, p, usize::MAX / 2),
                DEVICE,
                &["`len`", "larger than the largest allowed"],
            );
            refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, p + 256, 4),
                DEVICE,
                &["`ptr`", "inside an allocation that starts at"],
            );
            let size = raw::range_size(p);
            assert!(size >= 4096);
            let whole = DeviceBuffer::<u32>::from_raw_parts(ctx, p, size / 4)?;
            assert_eq!(
                whole.into_raw_parts(),
                (p, size / 4),
                "the whole allocation is accepted"
            );
            let e = refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, p, size / 4 + 1),
                DEVICE,
                &["`len`", "passes the end of the allocation"],
            );
            assert_eq!(e.code(), ErrorCode::InvalidInput);
            refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, h as u64, 4),
                DEVICE,
                &["`ptr`", "PinnedBuffer"],
            );
            refused(
                DeviceBuffer::<u32>::from_raw_parts(ctx, heap, 4),
                DEVICE,
                &["`ptr`", "no memory the driver knows"],
            );

            // page-locked memory
            refused(
                PinnedBuffer::<u32>::from_raw_parts(ctx, h.cast::<u8>().add(1).cast(), 4),
                PINNED,
                &["`ptr`", "not aligned"],
            );
            refused(
                PinnedBuffer::<u32>::from_raw_parts(ctx, std::ptr::null_mut(), 4),
                PINNED,
                &["`ptr` is null"],
            );
            refused(
                PinnedBuffer::<u32>::from_raw_parts(ctx, h.cast(), 1 << 34),
                PINNED,
                &["`len`", "passes the end"],
            );
            refused(
                PinnedBuffer::<u32>::from_raw_parts(ctx, p as usize as *mut u32, 4),
                PINNED,
                &["`ptr`", "device memory"],
            );
            refused(
                PinnedBuffer::<u32>::from_raw_parts(ctx, heap as usize as *mut u32, 4),
                PINNED,
                &["`ptr`", "no memory the driver knows"],
            );
            let whole = PinnedBuffer::<u32>::from_raw_parts(ctx, h.cast(), 1024)?;
            assert_eq!(
                whole.into_raw_parts(),
                (h.cast(), 1024),
                "the whole allocation is accepted"
            );

            // managed memory
            if managed_supported(ctx)? {
                let m = raw::alloc_managed(4096);
                refused(
                    ManagedBuffer::<u32>::from_raw_parts(ctx, m + 2, 4),
                    MANAGED,
                    &["`ptr`", "not aligned"],
                );
                refused(
                    ManagedBuffer::<u32>::from_raw_parts(ctx, 0, 4),
                    MANAGED,
                    &["`ptr` is null"],
                );
                let size = raw::range_size(m);
                let whole = ManagedBuffer::<u32>::from_raw_parts(ctx, m, size / 4)?;
                assert_eq!(
                    whole.into_raw_parts(),
                    (m, size / 4),
                    "the whole allocation is accepted"
                );
                refused(
                    ManagedBuffer::<u32>::from_raw_parts(ctx, m, size / 4 + 1),
                    MANAGED,
                    &["`len`", "passes the end"],
                );
                refused(
                    ManagedBuffer::<u32>::from_raw_parts(ctx, p, 4),
                    MANAGED,
                    &["`ptr`", "not managed memory"],
                );
                refused(
                    DeviceBuffer::<u32>::from_raw_parts(ctx, m, 4),
                    DEVICE,
                    &["`ptr`", "ManagedBuffer"],
                );
                refused(
                    PinnedBuffer::<u32>::from_raw_parts(ctx, m as usize as *mut u32, 4),
                    PINNED,
                    &["`ptr`", "managed memory"],
                );
                raw::free(m);
            }
        }

        // memory of another context (of the same device): refused by this one's guard
        with_context(&device, ContextFlags::default(), |other| {
            assert_ne!(common::handle(other), common::handle(ctx));
            let q = raw::alloc(4096); // `other` is current here
            let hq = raw::alloc_host(4096);
            // SAFETY: refused before anything is taken over.
            unsafe {
                let e = refused(
                    DeviceBuffer::<u32>::from_raw_parts(ctx, q, 4),
                    DEVICE,
                    &["`ptr`", "is of context", "not of this one"],
                );
                assert!(
                    matches!(e.invalid(), Some(cuda_brand::Invalid::WrongContext { .. })),
                    "{e}"
                );
                let e = refused(
                    PinnedBuffer::<u32>::from_raw_parts(ctx, hq.cast(), 4),
                    PINNED,
                    &["`ptr`", "is of context", "not of this one"],
                );
                assert!(
                    matches!(e.invalid(), Some(cuda_brand::Invalid::WrongContext { .. })),
                    "{e}"
                );
                if managed_supported(ctx)? {
                    let mq = raw::alloc_managed(4096);
                    let e = refused(
                        ManagedBuffer::<u32>::from_raw_parts(ctx, mq, 4),
                        MANAGED,
                        &["`ptr`", "is of context", "not of this one"],
                    );
                    assert!(
                        matches!(e.invalid(), Some(cuda_brand::Invalid::WrongContext { .. })),
                        "{e}"
                    );
                    raw::free(mq);
                }
            }
            raw::free(q);
            raw::free_host(hq);
            Ok::<_, Error>(())
        })?;

        // every refusal left the memory to its owner: these frees succeed
        raw::free(p);
        raw::free_host(h);
        drop(on_the_heap);
        Ok::<_, Error>(())
    })
    .unwrap();
}

fn raw_parts_of_setup_buffers_leave_their_teardown() {
    use cuda_brand::{ManagedBuffer, with_phases};
    let device = common::gpu();
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((dev, pinned, managed), run) = phases.setup(|ctx| {
            let managed = match ManagedBuffer::from_slice(ctx, &[5u32, 6]) {
                Ok(m) => Some(m),
                Err(e) if e.code() == ErrorCode::NotSupported => None,
                Err(e) => return Err(e),
            };
            Ok::<_, Error>((
                ctx.from_slice(&[1u32, 2])?,
                ctx.pinned_from_slice(&[3u32, 4])?,
                managed,
            ))
        })?;
        // SAFETY: freed below by the program, after the context is idle; unused meanwhile.
        let (d, _) = unsafe { dev.into_raw_parts() };
        // SAFETY: as above.
        let (h, _) = unsafe { pinned.into_raw_parts() };
        // SAFETY: as above.
        let m = managed.map(|m| unsafe { m.into_raw_parts() }.0);
        run.synchronize()?;
        let driver = common::driver();
        // SAFETY: each handed out above, freed once here; the teardown frees them again
        // only if `into_raw_parts` left them on its list, and then reports that free's error.
        unsafe {
            let rc = if common::mempool_of(d) != 0 {
                (driver.cuMemFreeAsync)(d, std::ptr::null_mut())
            } else {
                (driver.cuMemFree_v2)(d)
            };
            assert_eq!(rc, 0, "free of the device buffer's memory");
            assert_eq!((driver.cuMemFreeHost)(h.cast()), 0, "cuMemFreeHost");
            if let Some(m) = m {
                assert_eq!((driver.cuMemFree_v2)(m), 0, "cuMemFree of managed memory");
            }
        }
        raw::synchronize();
        Ok::<_, Error>(())
    })
    .unwrap(); // the teardown freed nothing twice
}

gpu_tests!(
    a_default_pool_buffer_is_ordered_after_another_librarys_pending_work,
    pitched_2d_buffers_copy_windows_of_host_images_both_ways,
    a_2d_buffer_of_zero_sized_elements_too_many_to_count_is_an_error_in_to_vec,
    pitched_3d_buffers_copy_volumes_and_boxes_both_ways,
    a_3d_volume_wider_than_the_pitch_alignment_round_trips_exactly,
    empty_3d_buffers_allocate_nothing_and_copy_nothing,
    a_scope_copy_takes_the_destination_first_and_leaves_the_source_as_it_was,
    a_3d_copy_between_boxes_copies_the_source_box_into_the_destination_box,
    a_peer_copy_whose_source_overlaps_its_destination_is_refused_before_the_driver,
    managed_memory_is_seen_in_order_by_the_host_and_kernels,
    a_pool_of_ones_own_serves_buffers_and_scopes_with_its_settings,
    copy_round_trip_preserves_values_of_several_types_and_sizes,
    a_64_mib_buffer_round_trips,
    zero_length_buffers_allocate_nothing_and_work,
    zeroed_is_zero_and_fill_sets_every_element,
    views_and_split_copies_touch_only_their_range,
    bad_lengths_are_errors_and_bad_ranges_panic_clearly_before_the_driver,
    pinned_memory_is_zeroed_and_a_host_slice,
    buffers_work_and_drop_on_a_scoped_thread_without_a_current_context,
    buffers_of_an_outer_context_work_inside_a_nested_one,
    buffers_round_trip_through_raw_parts,
    pool_memory_handed_out_is_adopted_by_another_context_of_its_device,
    memory_of_raw_driver_calls_is_adopted_and_freed_by_its_buffer,
    bad_raw_parts_are_refused_naming_the_argument,
    a_managed_pointer_inside_its_allocation_is_refused_and_its_start_accepted,
    raw_parts_of_setup_buffers_leave_their_teardown,
);
