//! Kernels written as CUDA code usually is, pointers without lengths and `int` sizes
//! (`saxpy`, `vectorAdd`, `reduce`, `stencil2d` of `kernels/kernels.cu`), declared with
//! `InPtr<T>` / `OutPtr<T>` and launched from safe code: no raw address, no `unsafe` but the
//! declaration. Each asserts every value the kernel wrote, and the crate's checks of pointer
//! arguments: the overlap check, the order of a multi-stream scope, the owned layer's
//! batches. Skips without a device; fails instead with `CUDA_BRAND_REQUIRE_GPU=1`.

use std::sync::Arc;

use crate::common;
use crate::owned::{owned_buffer, owned_setup, spin_kernel};

use cuda_brand::owned::OwnedKernel;
use cuda_brand::prelude::*;
use cuda_brand::{DeviceBuffer2D, DeviceBuffer3D, ErrorCode, Invalid};

/// `saxpy(int n, float a, const float *x, float *y)`.
type Saxpy = (i32, f32, InPtr<f32>, OutPtr<f32>);
/// `vectorAdd(const float *A, const float *B, float *C, int numElements)`.
type VectorAdd = (InPtr<f32>, InPtr<f32>, OutPtr<f32>, i32);
/// `reduce(const float *g_idata, float *g_odata, unsigned int n)`.
type Reduce = (InPtr<f32>, OutPtr<f32>, u32);
/// `stencil2d(const float *in, size_t inPitch, float *out, size_t outPitch, int width,
/// int height)`.
type Stencil2d = (InPtr<f32>, usize, OutPtr<f32>, usize, i32, i32);

/// `saxpy` of the sample module.
///
/// # Safety
/// Every launch of the kernel passes an `n` of at most both lengths and a grid of fewer
/// than 2^31 threads: saxpy reads `x[0..n]` and writes `y[0..n]`.
unsafe fn saxpy<'m, 'ctx>(module: &'m Module<'ctx>) -> Result<Kernel<'m, 'ctx, Saxpy>> {
    // SAFETY: saxpy's C parameter list is `Saxpy`; how far it reaches is the caller's
    // promise (above).
    unsafe { module.kernel::<Saxpy>("saxpy") }
}

/// `x[i] = i`, `y[i] = 2i`, `a = 3`: `y[i] = 5i`, exact in `f32` below 2^24 / 5.
fn saxpy_declared_with_pointers_computes_five_i_without_a_raw_address() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: every launch below passes n at most both lengths, with `config_for(n)`.
        let saxpy = unsafe { saxpy(&module) }?;
        let stream = ctx.new_stream()?;
        for n in [1usize, 1000, 1 << 20] {
            let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let y: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
            let (dx, mut dy) = (ctx.from_slice(&x)?, ctx.from_slice(&y)?);
            let config = saxpy.config_for(n)?;
            stream.scope(|s| s.launch(&saxpy, config, (n as i32, 3.0f32, &dx, &mut dy)))?;
            let want: Vec<f32> = (0..n).map(|i| (5 * i) as f32).collect();
            assert_eq!(dy.to_vec()?, want, "n = {n}");
        }
        // ranges of buffers and views of a scope, the same `n` for both
        let x: Vec<f32> = (0..100).map(|i| i as f32).collect();
        let (dx, mut dy) = (ctx.from_slice(&x)?, ctx.from_slice(&[1.0f32; 100])?);
        // y[50..80] = 2 * x[10..40] + 1
        let config = LaunchConfig::linear(1, 64);
        stream.scope(|s| {
            s.launch(
                &saxpy,
                config,
                (30i32, 2.0f32, &dx[10..40], &mut dy[50..80]),
            )
        })?;
        stream.scope(|s| {
            // a scope's views: y[0..10] = -1 * y[90..100] + y[0..10] = 0
            let dy = s.bind_mut(&mut dy);
            s.launch(
                &saxpy,
                LaunchConfig::linear(1, 32),
                (10i32, -1.0f32, dy.slice(90..).into_ref(), dy.slice(..10)),
            )
        })?;
        let y = dy.to_vec()?;
        for (i, &v) in y.iter().enumerate() {
            let want = match i {
                0..10 => 0.0,
                50..80 => 2.0 * (i - 40) as f32 + 1.0,
                _ => 1.0,
            };
            assert_eq!(v, want, "element {i}");
        }
        Ok(())
    });
}

/// cuda-samples' vectorAdd, with `numElements` below the output's length: the elements
/// after it keep their value.
fn vector_add_from_the_cuda_samples_adds_num_elements_floats() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: vectorAdd's C parameter list is `VectorAdd`; it touches A, B and C below
        // numElements (int indices), and the one launch passes numElements at most every
        // length, with a grid of `config_for(n)`.
        let add = unsafe { module.kernel::<VectorAdd>("vectorAdd") }?;
        let n = 50_000usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 0.25 - (i % 7) as f32).collect();
        let (da, db) = (ctx.from_slice(&a)?, ctx.from_slice(&b)?);
        let mut dc = ctx.from_slice(&vec![-1.0f32; n + 100])?;
        let config = add.config_for(n)?;
        ctx.new_stream()?
            .scope(|s| s.launch(&add, config, (&da, &db, &mut dc, n as i32)))?;
        let c = dc.to_vec()?;
        for i in 0..n {
            assert_eq!(c[i], a[i] + b[i] + 0.0, "element {i}");
        }
        assert_eq!(&c[n..], &[-1.0; 100][..], "past numElements: untouched");
        Ok(())
    });
}

/// cuda-samples' reduce3: one partial sum per block of 512 inputs in dynamic shared memory
/// of 256 floats, then a second pass over the partials, then the host adds the last few.
/// Small integers, so every sum is exact in `f32` (all below 2^24) whatever the order.
fn reduce_with_dynamic_shared_memory_sums_exactly_in_two_passes() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        const BLOCK: u32 = 256;
        let config = |inputs: usize| {
            let blocks = inputs.div_ceil(2 * BLOCK as usize) as u32;
            (
                blocks,
                LaunchConfig::linear(blocks, BLOCK).with_shared_mem(BLOCK * 4),
            )
        };
        // SAFETY: reduce's C parameter list is `Reduce`; it reads g_idata below n and writes
        // g_odata[blockIdx.x], and keeps blockDim.x floats in dynamic shared memory. Every
        // launch below passes n = the input's length, a block of 256 (a power of two) with
        // 256 * 4 bytes of dynamic shared memory, and a grid of one block per 512 inputs,
        // which the output holds.
        let reduce = unsafe { module.kernel::<Reduce>("reduce") }?;
        let n = (1usize << 20) + 123;
        let input: Vec<f32> = (0..n).map(|i| (i % 16) as f32).collect();
        let want: u64 = (0..n as u64).map(|i| i % 16).sum();
        let input = ctx.from_slice(&input)?;
        let (blocks, first) = config(n);
        let (blocks2, second) = config(blocks as usize);
        let mut partials = vec![0.0f32; blocks as usize];
        let mut partials2 = vec![0.0f32; blocks2 as usize];
        ctx.new_stream()?.scope(|s| {
            let out = s.alloc_zeroed::<f32>(blocks as usize)?;
            s.launch(&reduce, first, (&input, out, n as u32))?;
            let out2 = s.alloc_zeroed::<f32>(blocks2 as usize)?;
            s.launch(&reduce, second, (out.into_ref(), out2, blocks))?;
            s.copy_to_host(&mut partials, out.into_ref())?;
            s.copy_to_host(&mut partials2, out2.into_ref())
        })?;
        // every first-pass partial is its block's sum
        for (b, &p) in partials.iter().enumerate() {
            let block: u64 = (b * 512..((b + 1) * 512).min(n))
                .map(|i| i as u64 % 16)
                .sum();
            assert_eq!(p, block as f32, "block {b}");
        }
        assert_eq!(partials2.len(), 5);
        let total: f32 = partials2.iter().sum();
        assert_eq!(total as u64, want);
        assert_eq!(total, want as f32);
        Ok(())
    });
}

/// The five-point average of `stencil2d` on the host, with the kernel's float operations in
/// its order: `0.2f * (c + l + r + up + down)`.
fn stencil_on_host(input: &[f32], width: usize, height: usize) -> Vec<f32> {
    let at = |x: usize, y: usize| input[y * width + x];
    let mut out = Vec::with_capacity(width * height);
    for y in 0..height {
        for x in 0..width {
            let c = at(x, y);
            let l = if x > 0 { at(x - 1, y) } else { c };
            let r = if x + 1 < width { at(x + 1, y) } else { c };
            let up = if y > 0 { at(x, y - 1) } else { c };
            let down = if y + 1 < height { at(x, y + 1) } else { c };
            out.push(0.2f32 * (c + l + r + up + down));
        }
    }
    out
}

/// A 2D configuration of 16 x 16 blocks covering `width` x `height`.
fn grid_2d(width: usize, height: usize) -> LaunchConfig {
    let blocks = |n: usize| n.div_ceil(16) as u32;
    LaunchConfig::new([blocks(width), blocks(height), 1], [16, 16, 1])
}

/// stencil2d on pitched buffers, each pitch from its buffer: the same floats as the host
/// computes. A 3D buffer is one more 2D array, of `height * depth` rows.
fn stencil2d_on_pitched_buffers_matches_the_host_exactly() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: stencil2d's C parameter list is `Stencil2d`; it touches rows 0..height of
        // `width` floats, `pitch` bytes apart, of both arrays; every launch below passes each
        // buffer's own pitch and a width and height that both buffers have.
        let stencil = unsafe { module.kernel::<Stencil2d>("stencil2d") }?;
        let stream = ctx.new_stream()?;
        // odd sizes, so that rows are padded to the pitch
        let (width, height) = (37usize, 23usize);
        let host: Vec<f32> = (0..width * height)
            .map(|i| ((i % width) * 3 + (i / width) * 7) as f32 % 10.0)
            .collect();
        let mut input = DeviceBuffer2D::<f32>::zeroed(ctx, width, height)?;
        input.copy_from_host(&host, width)?;
        let mut output = DeviceBuffer2D::<f32>::zeroed(ctx, width, height)?;
        assert!(input.pitch_bytes() >= width * 4);
        let (in_pitch, out_pitch) = (input.pitch_bytes(), output.pitch_bytes());
        stream.scope(|s| {
            s.launch(
                &stencil,
                grid_2d(width, height),
                (
                    &input,
                    in_pitch,
                    &mut output,
                    out_pitch,
                    width as i32,
                    height as i32,
                ),
            )
        })?;
        assert_eq!(output.to_vec()?, stencil_on_host(&host, width, height));
        // a volume of 4 slices of 5 rows: 20 rows of one 2D array
        let (depth, rows) = (4usize, 5usize);
        let host3: Vec<f32> = (0..width * rows * depth).map(|i| (i % 13) as f32).collect();
        let mut input3 = DeviceBuffer3D::<f32>::zeroed(ctx, width, rows, depth)?;
        input3.copy_from_host(&host3, width, rows)?;
        let mut output3 = DeviceBuffer3D::<f32>::zeroed(ctx, width, rows, depth)?;
        let (in_pitch, out_pitch) = (input3.pitch_bytes(), output3.pitch_bytes());
        let all_rows = rows * depth;
        stream.scope(|s| {
            s.launch(
                &stencil,
                grid_2d(width, all_rows),
                (
                    &input3,
                    in_pitch,
                    &mut output3,
                    out_pitch,
                    width as i32,
                    all_rows as i32,
                ),
            )
        })?;
        assert_eq!(output3.to_vec()?, stencil_on_host(&host3, width, all_rows));
        Ok(())
    });
}

/// Two views of one buffer, `x` one element after `y`, for saxpy's `InPtr` and `OutPtr`:
/// refused before the launch, both arguments named; one `DeviceMut` for both, too. The
/// buffer keeps its values. Halves that do not overlap launch.
fn an_out_ptr_overlapping_an_in_ptr_is_refused_before_the_launch() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: every launch below passes n at most both lengths, in one block.
        let saxpy = unsafe { saxpy(&module) }?;
        let n = 64usize;
        let host: Vec<f32> = (0..=n).map(|i| i as f32).collect();
        let mut d = ctx.from_slice(&host)?;
        let config = LaunchConfig::linear(1, 128);
        let (shifted, same) = ctx.new_stream()?.scope(|s| {
            let d = s.bind_mut(&mut d);
            let shifted = s.launch(
                &saxpy,
                config,
                (n as i32, 2.0f32, d.slice(1..), d.slice(..n)),
            );
            let same = s.launch(
                &saxpy,
                config,
                (n as i32, 2.0f32, d.slice(..n), d.slice(..n)),
            );
            Ok::<_, Error>((shifted.unwrap_err(), same.unwrap_err()))
        })?;
        for e in [&shifted, &same] {
            assert_eq!(e.call(), "StreamScope::launch");
            assert_eq!(e.code(), ErrorCode::InvalidInput);
        }
        let bytes = (n * 4) as u64;
        let Some(Invalid::Overlap {
            first,
            first_range,
            second,
            second_range,
        }) = shifted.invalid()
        else {
            panic!("not an overlap: {shifted}");
        };
        assert_eq!(
            (&**first, &**second),
            ("`InPtr` argument 2", "`OutPtr` argument 3")
        );
        assert_eq!((first_range.1, second_range.1), (bytes, bytes));
        assert_eq!(
            first_range.0,
            second_range.0 + 4,
            "x starts one element after y"
        );
        let Some(Invalid::Overlap {
            first_range,
            second_range,
            ..
        }) = same.invalid()
        else {
            panic!("not an overlap: {same}");
        };
        assert_eq!(first_range, second_range);
        assert_eq!(d.to_vec()?, host, "nothing ran");
        // disjoint halves: y = d[32..64], x = d[0..32]
        ctx.new_stream()?.scope(|s| {
            let (lo, hi) = d.split_at_mut(n / 2);
            s.launch(&saxpy, config, ((n / 2) as i32, 2.0f32, &*lo, hi))
        })?;
        let after = d.to_vec()?;
        for (i, &v) in after.iter().enumerate() {
            let want = if (n / 2..n).contains(&i) {
                2.0 * (i - n / 2) as f32 + i as f32
            } else {
                i as f32
            };
            assert_eq!(v, want, "element {i}");
        }
        Ok(())
    });
}

/// In a scope over two streams, a pointer argument is ordered like a slice: a launch on
/// `b` that reads (`InPtr`) what `a` writes after a long spin waits for the write, and a
/// copy on `b` of what a launch on `a` writes (`OutPtr`) waits for the launch.
fn pointer_arguments_are_ordered_across_the_streams_of_one_scope() {
    common::in_context(|ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: every launch below passes n = both lengths, with `config_for(n)`.
        let saxpy = unsafe { saxpy(&module) }?;
        // SAFETY: spin(long long) busy-waits and touches no memory.
        let spin = unsafe { module.kernel::<(i64,)>("spin") }?;
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let n = 1 << 20;
        let config = saxpy.config_for(n)?;
        let mut x = ctx.zeroed::<f32>(n)?;
        let mut y = ctx.zeroed::<f32>(n)?;
        let mut back = vec![0.0f32; n];
        for round in 1..=5u8 {
            let value = f32::from(round);
            a.scope_pair(&b, |sa, sb| {
                let (x, y) = (sa.bind_mut(&mut x), sa.bind_mut(&mut y));
                // a: spin ~20 ms, then x = value; b: y = 2x + y must see that x
                sa.launch(&spin, LaunchConfig::linear(1, 1), (40_000_000i64,))?;
                sa.fill(x, value)?;
                sb.launch(&saxpy, config, (n as i32, 2.0f32, x.into_ref(), y))?;
                // a again: after b's write of y, spin, then y = 3x + y; b copies y out
                sa.launch(&spin, LaunchConfig::linear(1, 1), (40_000_000i64,))?;
                sa.launch(&saxpy, config, (n as i32, 3.0f32, x.into_ref(), y))?;
                sb.copy_to_host(&mut back, y.into_ref())
            })?;
            // y grows by 5 * value each round
            let want = 5.0 * (1..=round).map(f32::from).sum::<f32>();
            assert!(
                back.iter().all(|&v| v == want),
                "round {round}: {:?}",
                &back[..4]
            );
        }
        Ok(())
    });
}

/// The owned layer: an awaited batch launches saxpy, declared with `OwnedKernel::new`, on
/// an `Arc` of a buffer (read, `InPtr`) and an owned buffer (written, `OutPtr`).
fn an_owned_kernel_with_pointer_parameters_runs_in_an_awaited_batch() {
    let device = common::gpu();
    let (home, module, stream) = owned_setup(&device);
    // SAFETY: saxpy's C parameter list is `Saxpy`; its one launch below passes n = both
    // lengths, with a grid of `config_for(n)`.
    let saxpy = Arc::new(unsafe { OwnedKernel::<Saxpy>::new(&module, "saxpy") }.unwrap());
    let spin = spin_kernel(&module);
    let n = 1 << 16;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
    let (x, y) = (Arc::new(owned_buffer(&home, &x)), owned_buffer(&home, &y));
    let config = home.enter(|ctx| saxpy.bind(ctx)?.config_for(n)).unwrap();
    let (result, (_x, y, _saxpy, _spin)) = stream
        .submit((x, y, saxpy, spin), move |s, (x, y, saxpy, spin)| {
            s.launch(spin, LaunchConfig::linear(1, 1), (2_000_000i64,))?;
            s.launch(saxpy, config, (n as i32, 3.0f32, x, y))
        })
        .wait();
    result.unwrap();
    let want: Vec<f32> = (0..n).map(|i| (5 * i) as f32).collect();
    assert_eq!(home.enter(|ctx| y.bind(ctx)?.to_vec()).unwrap(), want);
}

gpu_tests!(
    saxpy_declared_with_pointers_computes_five_i_without_a_raw_address,
    vector_add_from_the_cuda_samples_adds_num_elements_floats,
    reduce_with_dynamic_shared_memory_sums_exactly_in_two_passes,
    stencil2d_on_pitched_buffers_matches_the_host_exactly,
    an_out_ptr_overlapping_an_in_ptr_is_refused_before_the_launch,
    pointer_arguments_are_ordered_across_the_streams_of_one_scope,
    an_owned_kernel_with_pointer_parameters_runs_in_an_awaited_batch,
);
