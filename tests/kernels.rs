//! Modules, functions and launches on a real GPU. Skips without a device; fails instead
//! with `CUDA_BRAND_REQUIRE_GPU=1`.

use crate::common;

use cuda_brand::{
    ByValue, DeviceBuffer, ErrorCode, Event, EventFlags, FunctionAttribute, In, LaunchConfig,
    Module, Out, Stream, StreamFlags,
};

const PTX: &str = include_str!("../kernels/kernels.ptx");
const CUBIN: &[u8] = include_bytes!("../kernels/kernels_sm90.cubin");

fn vector_add_is_correct_for_every_element() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        // stays below all three lengths.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        for n in [1usize, 1000, 1 << 20, (1 << 20) + 7] {
            let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let b: Vec<f32> = (0..n).map(|i| (2 * i) as f32 + 0.5).collect();
            let (da, db) = (
                DeviceBuffer::from_slice(ctx, &a)?,
                DeviceBuffer::from_slice(ctx, &b)?,
            );
            let mut dc = DeviceBuffer::<f32>::zeroed(ctx, n)?;
            let config = add.config_for(n)?;
            stream.scope(|s| s.launch(&add, config, (&da, &db, &mut dc)))?;
            let c = dc.to_vec()?;
            for i in 0..n {
                assert_eq!(c[i], a[i] + b[i], "n = {n}, element {i}");
            }
        }
        Ok(())
    });
}

fn a_reduction_sums_exactly() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: sum_u64(const unsigned*, size_t, unsigned long long*, size_t), in bounds.
        let sum = unsafe { module.kernel::<(In<u32>, Out<u64>)>("sum_u64") }?;
        let stream = Stream::new(ctx, StreamFlags::Default)?;
        let n = 10_000_019usize;
        let host: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 12)
            .collect();
        let expected: u64 = host.iter().map(|&x| x as u64).sum();
        let input = DeviceBuffer::from_slice(ctx, &host)?;
        let mut out = [0u64];
        stream.scope(|s| {
            let total = s.alloc_zeroed::<u64>(1)?;
            s.launch(&sum, LaunchConfig::linear(264, 256), (&input, total))?;
            s.copy_to_host(&mut out, total.into_ref())
        })?;
        assert_eq!(out[0], expected);
        Ok(())
    });
}

fn scalar_arguments_and_sub_views_reach_the_kernel() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: scale(float*, size_t, float), in bounds.
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut x = DeviceBuffer::from_slice(ctx, &[1.0f32; 10])?;
        stream.scope(|s| {
            let x = s.bind_mut(&mut x);
            s.launch(&scale, LaunchConfig::linear(1, 64), (x.slice(2..5), 3.0f32))?;
            s.launch(&scale, LaunchConfig::linear(2, 32), (x.slice(4..), -1.0f32))
        })?;
        assert_eq!(
            x.to_vec()?,
            [1.0, 1.0, 3.0, 3.0, -3.0, -1.0, -1.0, -1.0, -1.0, -1.0]
        );
        Ok(())
    });
}

fn a_cubin_loads_and_runs_on_hopper_and_is_refused_elsewhere() {
    common::in_context(|ctx| {
        let cc = ctx.device()?.compute_capability()?;
        if (cc.major, cc.minor) != (9, 0) {
            // another architecture: the driver must refuse the sm_90 cubin, clearly
            let e = Module::from_binary(ctx, CUBIN).unwrap_err();
            assert_eq!(e.code(), ErrorCode::NoBinaryForGpu, "{e}");
            return Ok(());
        }
        let module = Module::from_binary(ctx, CUBIN)?;
        // SAFETY: as in the PTX test.
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        assert_eq!(scale.function().binary_version()?, 90);
        let mut x = DeviceBuffer::from_slice(ctx, &[2.0f32, 4.0])?;
        Stream::new(ctx, StreamFlags::NonBlocking)?
            .scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, 0.5f32)))?;
        assert_eq!(x.to_vec()?, [1.0, 2.0]);
        Ok(())
    });
}

fn not_an_image_is_refused_before_the_driver() {
    common::in_context(|ctx| {
        let e = Module::from_binary(ctx, b"hello").unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidImage);
        assert_eq!(e.call(), "Module::from_binary");
        let e = Module::from_ptx(ctx, "a\0b").unwrap_err();
        assert_eq!(
            e.detail(),
            Some("the PTX text contains a NUL byte at offset 1")
        );
        Ok(())
    });
}

fn a_broken_ptx_reports_the_jit_log_with_the_line() {
    common::skip_under_sanitizer("a broken PTX");
    common::in_context(|ctx| {
        let broken = ".version 7.5\n.target sm_75\n.address_size 64\n\n.visible .entry broken()\n{\n\tthis_is_not_an_instruction;\n\tret;\n}\n";
        let e = Module::from_ptx(ctx, broken).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidPtx, "{e}");
        let log = e.detail().expect("the JIT log");
        println!("{e}");
        assert!(log.starts_with("JIT log:"), "{log}");
        assert!(log.contains("line 7"), "the log names the line: {log}");
        Ok(())
    });
}

fn a_missing_function_is_an_error_naming_it() {
    common::skip_under_sanitizer("a missing function");
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let e = module.function("no_such_kernel").unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotFound);
        assert_eq!(
            e.to_string(),
            "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (named symbol not found): no function named `no_such_kernel` in the module"
        );
        Ok(())
    });
}

fn function_attributes_are_read_and_set() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let f = module.function("sum_u64")?;
        assert!(f.max_threads_per_block()? >= 256);
        assert!(f.num_registers()? > 0);
        assert_eq!(
            f.static_shared_bytes()?,
            1024 * 8,
            "__shared__ unsigned long long partial[1024]"
        );
        assert_eq!(
            f.ptx_version()?,
            52,
            "the virtual architecture it was compiled for: compute_52"
        );
        let cc = ctx.device()?.compute_capability()?;
        assert_eq!(f.binary_version()?, cc.major * 10 + cc.minor);
        assert!(f.attribute(FunctionAttribute::LocalSizeBytes)? >= 0);
        let e = module.function("empty")?;
        e.set_max_dynamic_shared_bytes(64 << 10)?;
        assert_eq!(e.max_dynamic_shared_bytes()?, 64 << 10);
        e.set_cache_config(cuda_brand::CacheConfig::PreferShared)?;
        let block = e.suggested_block_size(0)?;
        assert!((32..=1024).contains(&block) && block % 32 == 0, "{block}");
        Ok(())
    });
}

fn bad_launch_configurations_are_refused_before_the_driver() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: empty(float*, size_t) touches nothing.
        let empty = unsafe { module.kernel::<(Out<f32>,)>("empty") }?;
        let max = empty.function().max_threads_per_block()?;
        let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
        let mut buf = DeviceBuffer::<f32>::zeroed(ctx, 1)?;
        let bad = [
            LaunchConfig::linear(0, 32),
            LaunchConfig::linear(1, 0),
            LaunchConfig::new([1, 1, 1], [32, 32, 2]),
            LaunchConfig::linear(1, max + 1),
            LaunchConfig::new([1, 70_000, 1], [32, 1, 1]),
            LaunchConfig::linear(1, 32).with_shared_mem(1 << 30),
        ];
        for config in bad {
            let e = stream
                .scope(|s| s.launch(&empty, config, (&mut buf,)))
                .unwrap_err();
            assert_eq!(e.call(), "StreamScope::launch", "{config:?}");
            assert_eq!(e.code(), ErrorCode::InvalidInput);
            assert!(
                e.invalid()
                    .unwrap()
                    .to_string()
                    .starts_with("invalid launch configuration"),
                "{e}"
            );
        }
        let e = stream
            .scope(|s| s.launch(&empty, LaunchConfig::linear(1, max + 1), (&mut buf,)))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("the block has more threads than the kernel allows"),
            "{e}"
        );
        stream.scope(|s| s.launch(&empty, LaunchConfig::linear(1, max), (&mut buf,)))?;
        Ok(())
    });
}

fn module_globals_are_read_and_written() {
    common::skip_under_sanitizer("a missing global");
    common::in_context(|ctx| {
        let mut module = Module::from_ptx(ctx, PTX)?;
        module.global_mut::<i32>("counter")?.copy_from_host(&[40])?;
        assert_eq!(module.global::<f32>("table")?.len(), 16);
        {
            // SAFETY: bump(int) writes only its module's globals `counter` and `table`.
            let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
            Stream::new(ctx, StreamFlags::NonBlocking)?
                .scope(|s| s.launch(&mut bump, LaunchConfig::linear(1, 32), (2i32,)))?;
        }
        assert_eq!(module.global::<i32>("counter")?.to_vec()?, [42]);
        let table = module.global::<f32>("table")?.to_vec()?;
        assert_eq!(table, (0..16).map(|i| i as f32 * 2.0).collect::<Vec<_>>());
        // a name the module lacks is the driver's CUDA_ERROR_NOT_FOUND, with the name
        let e = module.global::<u8>("nope").unwrap_err();
        assert_eq!(e.code(), cuda_brand::ErrorCode::NotFound, "{e}");
        assert_eq!(e.detail(), Some("no global named `nope` in the module"));
        let e = module.global::<[u8; 3]>("counter").unwrap_err();
        assert_eq!(
            e.invalid().and_then(cuda_brand::Invalid::reason),
            Some("global `counter` has 4 bytes, not a whole number of 3-byte `[u8; 3]`")
        );
        Ok(())
    });
}

/// Every sample kernel of `cuda_brand::samples` (all but `write_wild`, which ends its
/// context on purpose), loaded from the crate alone and declared as the module's table says,
/// computes what the table says.
/// The kernels with slice parameters; those written with bare pointers (`saxpy`,
/// `vectorAdd`, `reduce`, `stencil2d`) run in `tests/pointer_kernels.rs`.
fn every_sample_kernel_runs_as_the_samples_module_documents() {
    common::in_context(|ctx| {
        let mut module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        let stream = ctx.new_stream()?;
        {
            // SAFETY: the declarations of the table in `cuda_brand::samples`, each the
            // kernel's C parameter list (kernels/kernels.cu); every kernel stays below the
            // lengths it is given and writes only its `Out` parameters.
            let (add, scale, sum, spin, empty, empty8) = unsafe {
                (
                    module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add")?,
                    module.kernel::<(Out<f32>, f32)>("scale")?,
                    module.kernel::<(In<u32>, Out<u64>)>("sum_u64")?,
                    module.kernel::<(i64,)>("spin")?,
                    module.kernel::<(Out<f32>,)>("empty")?,
                    module.kernel::<(Out<f32>, Out<f32>, In<f32>, In<f32>)>("empty8")?,
                )
            };
            // vector_add: a grid smaller than the data (the grid-stride loop covers it)
            let n = 100_003usize;
            let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let b: Vec<f32> = (0..n).map(|i| 0.25 - (i % 7) as f32).collect();
            let (da, db) = (ctx.from_slice(&a)?, ctx.from_slice(&b)?);
            let mut dc = ctx.zeroed::<f32>(n)?;
            stream.scope(|s| s.launch(&add, LaunchConfig::linear(13, 128), (&da, &db, &mut dc)))?;
            let c = dc.to_vec()?;
            for i in 0..n {
                assert_eq!(c[i], a[i] + b[i], "vector_add, element {i}");
            }
            // scale
            let mut x = ctx.from_slice(&[1.0f32, -2.0, 3.5, 0.0, 8.0])?;
            stream.scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, -2.0f32)))?;
            assert_eq!(x.to_vec()?, [-2.0, 4.0, -7.0, -0.0, -16.0]);
            // sum_u64: 1 + 2 + ... + 100000, with a power-of-two block
            let input: Vec<u32> = (1..=100_000).collect();
            let input = ctx.from_slice(&input)?;
            let mut total = [0u64];
            stream.scope(|s| {
                let out = s.alloc_zeroed::<u64>(1)?;
                s.launch(&sum, LaunchConfig::linear(40, 256), (&input, out))?;
                s.copy_to_host(&mut total, out.into_ref())
            })?;
            assert_eq!(total, [5_000_050_000]);
            // spin: about 20 million cycles keep the stream busy for milliseconds (an H100
            // runs up to 1.98 GHz: at least 10 ms)
            let (mut start, mut end) = (
                Event::new(ctx, EventFlags::new())?,
                Event::new(ctx, EventFlags::new())?,
            );
            let ms = stream.scope(|s| {
                let t0 = start.record(s)?;
                s.launch(&spin, LaunchConfig::linear(1, 1), (20_000_000i64,))?;
                let t1 = end.record(s)?;
                Ok::<_, cuda_brand::Error>((t0, t1))
            })?;
            let ms = ms.0.elapsed(&ms.1)?.as_secs_f32() * 1e3;
            assert!(ms >= 2.0, "spin of 20M cycles took {ms} ms");
            // empty and empty8 leave their buffers as they were
            let mut p = ctx.from_slice(&[5.0f32; 4])?;
            let mut q = ctx.from_slice(&[6.0f32; 3])?;
            let (r, t) = (ctx.from_slice(&[7.0f32; 2])?, ctx.from_slice(&[8.0f32; 1])?);
            stream.scope(|s| {
                let p = s.bind_mut(&mut p);
                s.launch(&empty, LaunchConfig::linear(2, 64), (p,))?;
                s.launch(&empty8, LaunchConfig::linear(2, 64), (p, &mut q, &r, &t))
            })?;
            assert_eq!(p.to_vec()?, [5.0; 4]);
            assert_eq!(q.to_vec()?, [6.0; 3]);
        }
        // bump writes the module's globals: declared with `kernel_mut`
        module.global_mut::<i32>("counter")?.copy_from_host(&[0])?;
        {
            // SAFETY: bump(int) writes only its module's globals `counter` and `table`.
            let mut bump = unsafe { module.kernel_mut::<(i32,)>("bump") }?;
            stream.scope(|s| {
                let bump = s.bind_kernel(&mut bump);
                s.launch(bump, LaunchConfig::linear(1, 32), (3i32,))?;
                s.launch(bump, LaunchConfig::linear(1, 32), (4i32,))
            })?;
        }
        assert_eq!(module.global::<i32>("counter")?.to_vec()?, [7]);
        let table = module.global::<f32>("table")?.to_vec()?;
        assert_eq!(table, (0..16).map(|i| i as f32 * 4.0).collect::<Vec<_>>());
        Ok(())
    });
}

/// A kernel taking a struct by value and an array by value, as nvcc writes them in PTX
/// (`.param .align 8 .b8 p[16]`): `by_value(unsigned long long *out, size_t out_len,
/// struct { unsigned long long a, b; } pair, unsigned n, struct { unsigned x, y, z; } v)`,
/// which writes `a, b, n, x, y, z` to `out[0..6]`.
const BY_VALUE_PTX: &str = "
.version 7.4
.target sm_52
.address_size 64

.visible .entry by_value(
	.param .u64 by_value_param_0,
	.param .u64 by_value_param_1,
	.param .align 8 .b8 by_value_param_2[16],
	.param .u32 by_value_param_3,
	.param .align 4 .b8 by_value_param_4[12]
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<5>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [by_value_param_0];
	ld.param.u64 	%rd2, [by_value_param_1];
	setp.lt.u64 	%p1, %rd2, 6;
	@%p1 bra 	$L__done;
	ld.param.u64 	%rd3, [by_value_param_2];
	ld.param.u64 	%rd4, [by_value_param_2+8];
	ld.param.u32 	%r1, [by_value_param_3];
	ld.param.u32 	%r2, [by_value_param_4];
	ld.param.u32 	%r3, [by_value_param_4+4];
	ld.param.u32 	%r4, [by_value_param_4+8];
	cvta.to.global.u64 	%rd5, %rd1;
	st.global.u64 	[%rd5], %rd3;
	st.global.u64 	[%rd5+8], %rd4;
	cvt.u64.u32 	%rd6, %r1;
	st.global.u64 	[%rd5+16], %rd6;
	cvt.u64.u32 	%rd6, %r2;
	st.global.u64 	[%rd5+24], %rd6;
	cvt.u64.u32 	%rd6, %r3;
	st.global.u64 	[%rd5+32], %rd6;
	cvt.u64.u32 	%rd6, %r4;
	st.global.u64 	[%rd5+40], %rd6;
$L__done:
	ret;
}
";

/// Parameters passed by value (a struct, an array) are laid out, checked and passed as C
/// lays them out; their count comes from the PTX signature (or `cuFuncGetParamCount`), so
/// reading them provokes no driver error.
fn structs_and_arrays_by_value_are_declared_checked_and_passed() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, BY_VALUE_PTX)?;
        let driver = cuda_brand::driver_version()?;
        if driver >= 12040 {
            let params = module.function("by_value")?.params()?;
            let layout: Vec<_> = params.iter().map(|p| (p.offset, p.size)).collect();
            assert_eq!(layout, [(0, 8), (8, 8), (16, 16), (32, 4), (36, 12)]);
            // a struct of the wrong size is refused, naming it
            // SAFETY: refused before it could be launched.
            let e = unsafe {
                module.kernel::<(Out<u64>, ByValue<[u64; 3]>, u32, ByValue<[u32; 3]>)>("by_value")
            }
            .unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidInput);
            assert!(
                e.invalid().unwrap().to_string().ends_with(
                    "is declared as 24 bytes at offset 16; the kernel's is 16 bytes at offset 16"
                ),
                "{e}"
            );
        }
        // SAFETY: by_value writes out[0..6] only, and only if out_len >= 6.
        let kernel = unsafe {
            module.kernel::<(Out<u64>, ByValue<[u64; 2]>, u32, ByValue<[u32; 3]>)>("by_value")
        }?;
        let mut out = ctx.zeroed::<u64>(6)?;
        ctx.new_stream()?.scope(|s| {
            s.launch(
                &kernel,
                LaunchConfig::linear(1, 1),
                (&mut out, [7u64, 8], 9u32, [10u32, 11, 12]),
            )
        })?;
        assert_eq!(out.to_vec()?, [7, 8, 9, 10, 11, 12]);
        Ok(())
    });
}

gpu_tests!(
    vector_add_is_correct_for_every_element,
    a_reduction_sums_exactly,
    scalar_arguments_and_sub_views_reach_the_kernel,
    a_cubin_loads_and_runs_on_hopper_and_is_refused_elsewhere,
    not_an_image_is_refused_before_the_driver,
    a_broken_ptx_reports_the_jit_log_with_the_line,
    a_missing_function_is_an_error_naming_it,
    function_attributes_are_read_and_set,
    bad_launch_configurations_are_refused_before_the_driver,
    module_globals_are_read_and_written,
    every_sample_kernel_runs_as_the_samples_module_documents,
    structs_and_arrays_by_value_are_declared_checked_and_passed,
);
