//! Module loading with JIT options, libraries, checked kernel declarations, launches with
//! attributes (clusters, cooperative launches, priorities) and, with the `nvrtc` feature,
//! runtime compilation. GPU tests skip without a device (fail instead with
//! `CUDA_BRAND_REQUIRE_GPU=1`); the checks made before any driver call, and NVRTC's
//! compiling (a host-side compiler), run everywhere.

use std::time::Duration;

use crate::common;

use cuda_brand::{
    ContextFlags, DeviceAttribute, DeviceBuffer, ErrorCode, In, JitFallback, JitOptions,
    LaunchConfig, Library, Module, Out, Stream, StreamFlags, with_context,
};

const PTX: &str = include_str!("../kernels/kernels.ptx");
const CUBIN: &[u8] = include_bytes!("../kernels/kernels_sm90.cubin");
const FATBIN: &[u8] = include_bytes!("../kernels/kernels.fatbin");
/// `kernels/launch_ex.cu` for sm_90: cluster_info, cluster_info_fixed, grid_sum, empty_ex.
const LAUNCH_EX_PTX: &str = include_str!("../kernels/launch_ex_sm90.ptx");

/// The installed driver's CUDA version (12040 for 12.4).
fn driver() -> i32 {
    cuda_brand::driver_version().expect("the driver's version")
}

/// `PTX` with a global of a name no earlier run used, so that the driver's JIT cache
/// cannot answer for the compiler (the info log would be empty).
fn uncached_ptx() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{PTX}\n.global .u32 jit_nonce_{}_{nanos};\n",
        std::process::id()
    )
}

// ---- JIT options ---------------------------------------------------------------------

fn jit_options_reach_the_compiler_and_its_info_log_comes_back() {
    common::in_context(|ctx| {
        let cc = ctx.device()?.compute_capability()?;
        let options = JitOptions::new()
            .optimization_level(3)
            .max_registers(16)
            .target(cc)
            .generate_line_info(true)
            .log_verbose(true);
        let (module, log) = ctx.module_from_ptx_logged(&uncached_ptx(), &options)?;
        println!("JIT info log ({:?}):\n{}", log.wall_time, log.info);
        assert!(
            log.info.contains("scale") && log.info.contains("registers"),
            "a verbose log names each kernel and its registers: {:?}",
            log.info
        );
        assert!(log.wall_time > Duration::ZERO, "{:?}", log.wall_time);
        for name in ["vector_add", "scale", "sum_u64", "bump"] {
            let registers = module.function(name)?.num_registers()?;
            assert!(registers <= 16, "{name} uses {registers} registers");
        }
        // SAFETY: vector_add(const float*, size_t, const float*, size_t, float*, size_t)
        // stays below all three lengths.
        let add = unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }?;
        let a: Vec<f32> = (0..1000).map(|i| i as f32).collect();
        let (da, db) = (ctx.from_slice(&a)?, ctx.from_slice(&a)?);
        let mut dc = ctx.zeroed::<f32>(1000)?;
        ctx.new_stream()?
            .scope(|s| s.launch(&add, add.config_for(1000)?, (&da, &db, &mut dc)))?;
        assert_eq!(dc.to_vec()?, a.iter().map(|x| 2.0 * x).collect::<Vec<_>>());
        Ok(())
    });
}

fn jit_without_optimization_and_with_debug_information_computes_the_same() {
    common::in_context(|ctx| {
        let options = JitOptions::new()
            .optimization_level(0)
            .generate_debug_info(true);
        let (module, _) = Module::from_ptx_logged(ctx, PTX, &options)?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let mut x = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
        ctx.new_stream()?
            .scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, 3.0f32)))?;
        assert_eq!(x.to_vec()?, [3.0, 6.0, 9.0]);
        Ok(())
    });
}

fn a_fatbin_loads_with_options_and_uses_its_exact_binary() {
    common::in_context(|ctx| {
        let cc = ctx.device()?.compute_capability()?;
        for fallback in [JitFallback::PreferPtx, JitFallback::PreferBinary] {
            let options = JitOptions::new().fallback(fallback);
            let (module, _) = Module::from_binary_logged(ctx, FATBIN, &options)?;
            let scale = module.function("scale")?;
            assert_eq!(scale.binary_version()?, cc.major * 10 + cc.minor);
            // the fatbin: an sm_90 cubin (from compute_90) and compute_75 PTX
            let expected_ptx = if (cc.major, cc.minor) == (9, 0) {
                90
            } else {
                75
            };
            assert_eq!(scale.ptx_version()?, expected_ptx, "{fallback:?}");
        }
        // the image is checked first, with options too
        let e = Module::from_binary_logged(ctx, &FATBIN[..100], &JitOptions::new()).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidImage);
        assert_eq!(e.call(), "Module::from_binary_logged");
        Ok(())
    });
}

fn a_broken_ptx_with_options_reports_the_error_log_naming_the_line() {
    common::skip_under_sanitizer("a broken PTX");
    common::in_context(|ctx| {
        let broken = ".version 7.4\n.target sm_52\n.address_size 64\n\n.visible .entry broken()\n{\n\tthis_is_not_an_instruction;\n\tret;\n}\n";
        let e =
            Module::from_ptx_logged(ctx, broken, &JitOptions::new().log_verbose(true)).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidPtx, "{e}");
        let log = e.detail().expect("the JIT log");
        assert!(log.starts_with("JIT log:"), "{log}");
        assert!(log.contains("line 7"), "the log names the line: {log}");
        Ok(())
    });
}

/// Runs everywhere: refused before the driver (and before `cuInit`).
fn jit_values_the_driver_would_misread_are_refused_before_it() {
    let e = Library::from_ptx_logged(PTX, &JitOptions::new().optimization_level(9)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Library::from_ptx failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): JIT \
         optimization level 9 is not one of 0 to 4"
    );
}

// ---- libraries -----------------------------------------------------------------------

fn a_library_is_loaded_once_and_used_by_two_contexts() {
    let device = common::gpu();
    if driver() < 12000 {
        // refused, as it should be; what the test is about cannot run
        let e = Library::from_ptx(PTX).unwrap_err();
        assert_eq!(e.code(), ErrorCode::DriverTooOld, "{e}");
        assert!(
            e.detail()
                .unwrap()
                .starts_with("cuLibraryLoadData needs a CUDA 12.0 driver (R525 or newer)"),
            "{e}"
        );
        common::skip(format!(
            "needs a CUDA 12.0 driver (cuLibraryLoadData), this one is {}",
            driver()
        ));
    }
    // loaded before any context, outside every with_context
    let library = Library::from_ptx(PTX).unwrap();
    let run = |k: f32| {
        with_context(&device, ContextFlags::default(), |a| {
            // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
            let scale_a = unsafe { library.kernel::<(Out<f32>, f32)>(a, "scale") }?;
            let mut xa = a.from_slice(&[1.0f32, 2.0])?;
            a.new_stream()?
                .scope(|s| s.launch(&scale_a, LaunchConfig::linear(1, 32), (&mut xa, k)))?;
            // a second context, nested: the same library, its own function
            let xb = with_context(&device, ContextFlags::default(), |b| {
                // SAFETY: as above.
                let scale_b = unsafe { library.kernel::<(Out<f32>, f32)>(b, "scale") }?;
                let mut xb = b.from_slice(&[10.0f32, 20.0])?;
                b.new_stream()?
                    .scope(|s| s.launch(&scale_b, LaunchConfig::linear(1, 32), (&mut xb, k)))?;
                xb.to_vec()
            })?;
            assert_eq!(xa.to_vec()?, [k, 2.0 * k]);
            assert_eq!(xb, [10.0 * k, 20.0 * k]);
            Ok::<_, cuda_brand::Error>(())
        })
        .unwrap()
    };
    // the library outlives the contexts it served
    run(2.0);
    run(3.0);
    drop(library);
}

fn a_library_from_a_checked_cubin_runs_on_hopper() {
    common::in_context(|ctx| {
        let cc = ctx.device()?.compute_capability()?;
        if driver() < 12000 || (cc.major, cc.minor) != (9, 0) {
            common::skip(format!(
                "needs a CUDA 12.0 driver and an sm_90 device (the cubin's); here driver {} \
                 and compute capability {cc}",
                driver()
            ));
        }
        let library = Library::from_binary(CUBIN)?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { library.kernel::<(Out<f32>, f32)>(ctx, "scale") }?;
        assert_eq!(scale.function().binary_version()?, 90);
        let mut x = ctx.from_slice(&[2.0f32, 4.0])?;
        ctx.new_stream()?
            .scope(|s| s.launch(&scale, LaunchConfig::linear(1, 32), (&mut x, 0.5f32)))?;
        assert_eq!(x.to_vec()?, [1.0, 2.0]);
        Ok(())
    });
}

fn a_missing_library_kernel_is_an_error_naming_it() {
    common::skip_under_sanitizer("a missing kernel");
    if driver() < 12000 {
        common::skip(format!(
            "needs a CUDA 12.0 driver (cuLibraryLoadData), this one is {}",
            driver()
        ));
    }
    common::in_context(|ctx| {
        let library = Library::from_ptx(PTX)?;
        let e = library.function(ctx, "no_such_kernel").unwrap_err();
        assert_eq!(e.code(), ErrorCode::NotFound, "{e}");
        assert_eq!(
            e.detail(),
            Some("no kernel named `no_such_kernel` in the library")
        );
        Ok(())
    });
}

/// Runs everywhere: the image check comes before any driver call.
fn a_damaged_library_image_is_refused_before_the_driver() {
    let e = Library::from_binary(b"hello").unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidImage);
    assert_eq!(e.call(), "Library::from_binary");
    let e = Library::from_binary(&CUBIN[..CUBIN.len() / 2]).unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidImage, "{e}");
    assert!(e.detail().is_some(), "the check says what is wrong: {e}");
    let e = Library::from_ptx("\x7fELF and more").unwrap_err();
    assert_eq!(
        e.detail(),
        Some(
            "the text starts with the ELF magic: it is a cubin, load it with Library::from_binary"
        )
    );
    let e = Library::from_ptx("a\0b").unwrap_err();
    assert_eq!(
        e.detail(),
        Some("the PTX text contains a NUL byte at offset 1")
    );
}

/// Runs only without a GPU: loading a library needs `cuInit`, which says why not.
fn without_a_device_a_library_reports_the_drivers_error() {
    let e = Library::from_ptx(PTX).unwrap_err();
    assert!(
        matches!(
            e.code(),
            ErrorCode::NoDevice | ErrorCode::DriverNotFound | ErrorCode::DriverTooOld
        ),
        "{e}"
    );
}

// ---- checked declarations ------------------------------------------------------------

fn declarations_are_checked_against_the_kernels_parameters() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        let scale = module.function("scale")?;
        if driver() < 12040 {
            // the driver cannot say: nothing is checked (and `params` says why)
            let e = scale.params().unwrap_err();
            assert_eq!(e.code(), ErrorCode::DriverTooOld, "{e}");
            // SAFETY: never launched.
            assert!(unsafe { module.kernel::<(Out<f32>, f64)>("scale") }.is_ok());
            common::skip(format!(
                "needs a CUDA 12.4 driver (cuFuncGetParamInfo), this one is {}",
                driver()
            ));
        }
        let layout: Vec<(usize, usize)> =
            scale.params()?.iter().map(|p| (p.offset, p.size)).collect();
        assert_eq!(
            layout,
            [(0, 8), (8, 8), (16, 4)],
            "scale(float*, size_t, float)"
        );
        // right declarations pass
        // SAFETY: never launched; the declarations are the kernels' (kernels/kernels.cu).
        unsafe {
            module.kernel::<(Out<f32>, f32)>("scale")?;
            module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add")?;
            module.kernel::<(In<u32>, Out<u64>)>("sum_u64")?;
            module.kernel::<(i64,)>("spin")?;
            module.kernel::<(Out<f32>, Out<f32>, In<f32>, In<f32>)>("empty8")?;
        }
        let wrong = |e: cuda_brand::Error| e.to_string();
        // too many
        // SAFETY: refused before it could be launched.
        let e = unsafe { module.kernel::<(Out<f32>, f32, f32)>("scale") }.unwrap_err();
        assert_eq!(
            wrong(e),
            "Module::kernel failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): the \
             declaration has 4 C parameters, the kernel has 3 (a slice `In<T>` or `Out<T>` is \
             two: a pointer and a `size_t` length; a pointer `InPtr<T>` or `OutPtr<T>` is one)"
        );
        // too few (the slice's length forgotten: a pointer alone)
        // SAFETY: refused.
        let e = unsafe { module.kernel::<(Out<f32>,)>("scale") }.unwrap_err();
        assert_eq!(
            wrong(e),
            "Module::kernel failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): the \
             declaration has 2 C parameters, the kernel has 3 (a slice `In<T>` or `Out<T>` is \
             two: a pointer and a `size_t` length; a pointer `InPtr<T>` or `OutPtr<T>` is one)"
        );
        // a scalar of the wrong size
        // SAFETY: refused.
        let e = unsafe { module.kernel::<(Out<f32>, f64)>("scale") }.unwrap_err();
        assert_eq!(
            wrong(e),
            "Module::kernel failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): C parameter \
             2 (`f64`, declared parameter 1) is declared as 8 bytes at offset 16; the kernel's \
             is 4 bytes at offset 16"
        );
        // spin(long long) declared with an int
        // SAFETY: refused.
        let e = unsafe { module.kernel::<(i32,)>("spin") }.unwrap_err();
        assert_eq!(
            e.invalid().and_then(cuda_brand::Invalid::reason),
            Some(
                "C parameter 0 (`i32`, declared parameter 0) is declared as 4 bytes at offset \
                 0; the kernel's is 8 bytes at offset 0"
            )
        );
        // a kernel that writes globals, declared through kernel_mut, and through typed()
        let mut module = module;
        // SAFETY: refused.
        let e = unsafe { module.kernel_mut::<(i64,)>("bump") }.unwrap_err();
        assert_eq!(e.call(), "Module::kernel_mut");
        // SAFETY: refused.
        let e = unsafe { module.function("scale")?.typed::<(f32, f32, f32)>() }.unwrap_err();
        assert_eq!(
            e.to_string(),
            "Function::typed failed: CUDA_BRAND_INVALID_INPUT (invalid input, refused before the driver saw it): C parameter \
             0 (`f32`, declared parameter 0) is declared as 4 bytes at offset 0; the kernel's \
             is 8 bytes at offset 0"
        );
        // a library's kernels are checked too
        if driver() >= 12000 {
            let library = Library::from_ptx(PTX)?;
            // SAFETY: refused.
            let e = unsafe { library.kernel::<(Out<f32>, f32, f32)>(ctx, "scale") }.unwrap_err();
            assert_eq!(e.call(), "Library::kernel");
            assert!(
                e.invalid()
                    .unwrap()
                    .to_string()
                    .starts_with("the declaration has 4 C parameters")
            );
        }
        Ok(())
    });
}

/// `fill_u32(unsigned *out, size_t out_len, unsigned v)`, whose signature only ptxas's
/// preprocessor shows: the `.entry` ptxas compiles is spelled through a macro, and the one a
/// reader without a preprocessor sees, with the value parameter missing, is behind `#if 0`.
const PTX_WITH_DIRECTIVES: &str = "\
.version 7.4
.target sm_52
.address_size 64
#define ENTRY .entry
#if 0
.visible .entry fill_u32(.param .u64 out, .param .u64 out_len)
{
\tret;
}
#endif
.visible ENTRY fill_u32(.param .u64 out, .param .u64 out_len, .param .u32 v)
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<3>;
\t.reg .b64 %rd<7>;
\tld.param.u64 %rd1, [out];
\tld.param.u64 %rd2, [out_len];
\tld.param.u32 %r1, [v];
\tmov.u32 %r2, %tid.x;
\tcvt.u64.u32 %rd3, %r2;
\tsetp.ge.u64 %p1, %rd3, %rd2;
\t@%p1 bra DONE;
\tcvta.to.global.u64 %rd4, %rd1;
\tshl.b64 %rd5, %rd3, 2;
\tadd.s64 %rd6, %rd4, %rd5;
\tst.global.u32 [%rd6], %r1;
DONE:
\tret;
}
";

/// PTX with preprocessor directives is checked as ptxas reads it: the driver's ptxas does
/// not preprocess PTX (on an H100, driver 580: "Parsing error near '#': syntax error"), so
/// such text never loads and no declaration can be checked against a signature that
/// directives hide. (The crate's reader of PTX signatures gives such text no parameter
/// count either: unit test `ptx_not_understood_leaves_the_kernel_without_a_list`.)
fn a_ptx_signature_behind_preprocessor_directives_is_checked_as_ptxas_reads_it() {
    common::in_context(|ctx| {
        let e = Module::from_ptx(ctx, PTX_WITH_DIRECTIVES).unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidPtx, "{e}");
        assert!(e.to_string().contains("near '#'"), "{e}");
        Ok(())
    });
}

/// The kernels of `kernels/kernels.cu` and their C parameters as (offset, size), written
/// out by hand from the C signatures.
const KERNEL_PARAMS: [(&str, &[(usize, usize)]); 8] = [
    // vector_add(const float*, size_t, const float*, size_t, float*, size_t)
    (
        "vector_add",
        &[(0, 8), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8)],
    ),
    // scale(float *x, size_t x_len, float k)
    ("scale", &[(0, 8), (8, 8), (16, 4)]),
    // sum_u64(const unsigned*, size_t, unsigned long long*, size_t)
    ("sum_u64", &[(0, 8), (8, 8), (16, 8), (24, 8)]),
    // empty(float*, size_t)
    ("empty", &[(0, 8), (8, 8)]),
    // empty8(float*, size_t, float*, size_t, const float*, size_t, const float*, size_t)
    (
        "empty8",
        &[
            (0, 8),
            (8, 8),
            (16, 8),
            (24, 8),
            (32, 8),
            (40, 8),
            (48, 8),
            (56, 8),
        ],
    ),
    // write_wild(float*, size_t)
    ("write_wild", &[(0, 8), (8, 8)]),
    // bump(int by)
    ("bump", &[(0, 4)]),
    // spin(long long cycles)
    ("spin", &[(0, 8)]),
];

/// Checks every kernel's parameters as `params` reports them against [`KERNEL_PARAMS`].
fn same_params(what: &str, params: impl Fn(&str) -> cuda_brand::Result<Vec<(usize, usize)>>) {
    for (name, expected) in KERNEL_PARAMS {
        let got = params(name).unwrap_or_else(|e| panic!("{what}, {name}: {e}"));
        assert_eq!(got, expected, "{what}, {name}");
    }
    println!("{what}: every kernel's parameters are its C signature's");
}

fn layout(f: cuda_brand::Function<'_, '_>) -> cuda_brand::Result<Vec<(usize, usize)>> {
    Ok(f.params()?.iter().map(|p| (p.offset, p.size)).collect())
}

/// Every way of loading kernels gives each its parameters as the C signature has them, and
/// (run by `scripts/sanitize` under compute-sanitizer's default options) asks the driver
/// only about parameters the kernel has: "ERROR SUMMARY: 0 errors". The count comes from
/// `cuFuncGetParamCount` on CUDA 13.2 drivers, else from the PTX, cubin or fatbin itself.
fn every_load_path_reads_each_kernels_parameters_without_a_driver_error() {
    common::in_context(|ctx| {
        if driver() < 12040 {
            common::skip(format!(
                "needs a CUDA 12.4 driver (cuFuncGetParamInfo), this one is {}",
                driver()
            ));
        }
        let cc = ctx.device()?.compute_capability()?;
        let module = Module::from_ptx(ctx, PTX)?;
        same_params("Module::from_ptx", |n| layout(module.function(n)?));
        let (module, _) = Module::from_ptx_logged(ctx, PTX, &JitOptions::new())?;
        same_params("Module::from_ptx_logged", |n| layout(module.function(n)?));
        let module = Module::from_binary(ctx, FATBIN)?;
        same_params("Module::from_binary (fatbin)", |n| {
            layout(module.function(n)?)
        });
        if (cc.major, cc.minor) == (9, 0) {
            let module = Module::from_binary(ctx, CUBIN)?;
            same_params("Module::from_binary (cubin)", |n| {
                layout(module.function(n)?)
            });
            {
                // SAFETY: the committed cubin, complete as nvcc wrote it.
                let module = unsafe { Module::from_binary_unchecked(ctx, CUBIN) }?;
                same_params("Module::from_binary_unchecked (cubin)", |n| {
                    layout(module.function(n)?)
                });
            }
        }
        let library = Library::from_ptx(PTX)?;
        same_params("Library::from_ptx", |n| layout(library.function(ctx, n)?));
        let library = Library::from_binary(FATBIN)?;
        same_params("Library::from_binary (fatbin)", |n| {
            layout(library.function(ctx, n)?)
        });
        // the same function taken twice, and declared through each way
        let module = Module::from_ptx(ctx, PTX)?;
        let scale = module.function("scale")?;
        assert_eq!(layout(scale)?, layout(module.function("scale")?)?);
        // SAFETY: never launched; the declarations are the kernels' (kernels/kernels.cu).
        unsafe {
            scale.typed::<(Out<f32>, f32)>()?;
            module.kernel::<(i64,)>("spin")?;
            library.kernel::<(In<f32>, In<f32>, Out<f32>)>(ctx, "vector_add")?;
        }
        Ok(())
    });
}

// ---- launch attributes ---------------------------------------------------------------
// ---- launch attributes ---------------------------------------------------------------

/// Returns if the device launches clusters; otherwise checks that a cluster launch says so,
/// and skips the test.
fn needs_clusters<'ctx>(ctx: cuda_brand::ContextGuard<'ctx>, module: &Module<'ctx>) {
    let cc = ctx.device().unwrap().compute_capability().unwrap();
    if cc.major >= 9 && driver() >= 11080 {
        return;
    }
    // SAFETY: cluster_info(unsigned*, size_t) writes out[4b..4b+4] below out_len only.
    let info = unsafe { module.kernel::<(Out<u32>,)>("cluster_info") }.unwrap();
    let mut out = DeviceBuffer::<u32>::zeroed(ctx, 32).unwrap();
    let config = LaunchConfig::linear(8, 32).with_cluster([2, 1, 1]);
    let e = ctx
        .new_stream()
        .unwrap()
        .scope(|s| s.launch(&info, config, (&mut out,)))
        .unwrap_err();
    assert!(
        matches!(e.code(), ErrorCode::NotSupported | ErrorCode::DriverTooOld),
        "{e}"
    );
    common::skip(format!("no thread-block clusters here ({e})"))
}

/// Loads the sm_90 kernels; skips the test on a device that cannot run them.
fn launch_ex_module(ctx: cuda_brand::ContextGuard<'_>) -> Module<'_> {
    let cc = ctx.device().unwrap().compute_capability().unwrap();
    if cc.major < 9 {
        common::skip(format!(
            "kernels/launch_ex_sm90.ptx needs compute capability 9.0, this device has {cc}"
        ));
    }
    Module::from_ptx(ctx, LAUNCH_EX_PTX).unwrap()
}

fn a_cluster_launch_gives_each_block_its_rank_in_the_cluster() {
    common::in_context(|ctx| {
        let module = launch_ex_module(ctx);
        needs_clusters(ctx, &module);
        // SAFETY: cluster_info(unsigned*, size_t) writes out[4b..4b+4] below out_len only.
        let info = unsafe { module.kernel::<(Out<u32>,)>("cluster_info") }?;
        let stream = ctx.new_stream()?;
        let blocks = 8u32;
        for cluster in [None, Some(2u32), Some(4), Some(8)] {
            let mut out = DeviceBuffer::<u32>::zeroed(ctx, 4 * blocks as usize)?;
            let mut config = LaunchConfig::linear(blocks, 32);
            if let Some(c) = cluster {
                config = config.with_cluster([c, 1, 1]);
            }
            stream.scope(|s| s.launch(&info, config, (&mut out,)))?;
            let out = out.to_vec()?;
            for b in 0..blocks {
                let seen = &out[4 * b as usize..4 * b as usize + 4];
                let expected = match cluster {
                    None => [0, 1, b, 0],
                    Some(c) => [b % c, c, b / c, 1],
                };
                assert_eq!(seen, expected, "block {b}, cluster {cluster:?}");
            }
        }
        Ok(())
    });
}

fn cluster_launches_are_checked_before_the_driver() {
    common::in_context(|ctx| {
        let module = launch_ex_module(ctx);
        needs_clusters(ctx, &module);
        // SAFETY: as above.
        let info = unsafe { module.kernel::<(Out<u32>,)>("cluster_info") }?;
        let stream = ctx.new_stream()?;
        let refused = |config: LaunchConfig| {
            let mut out = DeviceBuffer::<u32>::zeroed(ctx, 4 * 16).unwrap();
            let e = stream
                .scope(|s| s.launch(&info, config, (&mut out,)))
                .unwrap_err();
            assert_eq!(e.call(), "StreamScope::launch", "{e}");
            assert_eq!(e.code(), ErrorCode::InvalidClusterSize, "{e}");
            e.detail().unwrap().to_owned()
        };
        assert_eq!(
            refused(LaunchConfig::linear(6, 32).with_cluster([4, 1, 1])),
            "the grid [6, 1, 1] is not a whole number of clusters [4, 1, 1]: each grid \
             dimension must be a multiple of the cluster's"
        );
        assert_eq!(
            refused(LaunchConfig::linear(8, 32).with_cluster([2, 0, 1])),
            "cluster dimensions [2, 0, 1] have a zero"
        );
        // 16 blocks: more than the portable 8 this kernel allows
        let detail = refused(LaunchConfig::linear(16, 32).with_cluster([16, 1, 1]));
        assert!(
            detail.starts_with(
                "a cluster of 16 blocks ([16, 1, 1]) is larger than this kernel can be \
                 launched with for blocks of [32, 1, 1] threads and 0 bytes of dynamic shared \
                 memory: at most 8"
            ),
            "{detail}"
        );
        // allowed non-portable sizes: 16 runs on an H100 or H200 (in a new scope: a scope
        // keeps the limit it looked up)
        info.function()
            .set_non_portable_cluster_size_allowed(true)?;
        let mut out = DeviceBuffer::<u32>::zeroed(ctx, 4 * 16)?;
        stream.scope(|s| {
            s.launch(
                &info,
                LaunchConfig::linear(16, 32).with_cluster([16, 1, 1]),
                (&mut out,),
            )
        })?;
        let seen = out.to_vec()?;
        for b in 0..16u32 {
            assert_eq!(&seen[4 * b as usize..4 * b as usize + 4], [b, 16, 0, 1]);
        }
        // a kernel compiled for clusters of 2 (`__cluster_dims__(2, 1, 1)`)
        // SAFETY: cluster_info_fixed has cluster_info's parameters and bounds.
        let fixed = unsafe { module.kernel::<(Out<u32>,)>("cluster_info_fixed") }?;
        let e = stream
            .scope(|s| {
                s.launch(
                    &fixed,
                    LaunchConfig::linear(8, 32).with_cluster([4, 1, 1]),
                    (&mut out,),
                )
            })
            .unwrap_err();
        assert_eq!(
            e.detail(),
            Some(
                "the kernel was compiled for clusters of [2, 1, 1] blocks (`__cluster_dims__`); \
                 the launch asks for [4, 1, 1]"
            )
        );
        // launched plainly, it still runs in its clusters of two
        let mut out = DeviceBuffer::<u32>::zeroed(ctx, 4 * 8)?;
        stream.scope(|s| s.launch(&fixed, LaunchConfig::linear(8, 32), (&mut out,)))?;
        let seen = out.to_vec()?;
        for b in 0..8u32 {
            assert_eq!(&seen[4 * b as usize..4 * b as usize + 3], [b % 2, 2, b / 2]);
        }
        Ok(())
    });
}

fn a_cooperative_launch_synchronizes_its_whole_grid() {
    common::in_context(|ctx| {
        let module = launch_ex_module(ctx);
        // SAFETY: grid_sum(const unsigned*, size_t, unsigned*, size_t) reads in[i < in_len],
        // writes out[b < out_len] only, and synchronizes the grid only when launched
        // cooperatively (`is_valid()`), returning at once otherwise.
        let sum = unsafe { module.kernel::<(In<u32>, Out<u32>)>("grid_sum") }?;
        let sms = ctx
            .device()?
            .attribute(DeviceAttribute::MultiprocessorCount)? as u32;
        let per_sm = sum
            .function()
            .max_active_blocks_per_multiprocessor(256, 0)?;
        assert!(per_sm >= 1);
        let stream = ctx.new_stream()?;
        // the largest grid that fits at once, and a small one
        for blocks in [sms * per_sm, 3] {
            let n = blocks as usize * 256;
            let input: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
            let din = ctx.from_slice(&input)?;
            let mut out = ctx.from_slice(&vec![7u32; blocks as usize + 1])?;
            let config = LaunchConfig::linear(blocks, 256).with_cooperative();
            stream.scope(|s| s.launch(&sum, config, (&din, &mut out)))?;
            let out = out.to_vec()?;
            for b in 0..blocks as usize {
                let part: u32 = input[256 * b..256 * (b + 1)].iter().sum();
                assert_eq!(out[b], part, "block {b} of {blocks}");
            }
            assert_eq!(
                out[blocks as usize],
                input.iter().sum::<u32>(),
                "{blocks} blocks"
            );
        }
        Ok(())
    });
}

fn a_cooperative_grid_too_large_is_refused_before_the_driver() {
    common::in_context(|ctx| {
        let module = launch_ex_module(ctx);
        // SAFETY: as above.
        let sum = unsafe { module.kernel::<(In<u32>, Out<u32>)>("grid_sum") }?;
        let sms = ctx
            .device()?
            .attribute(DeviceAttribute::MultiprocessorCount)? as u32;
        let per_sm = sum
            .function()
            .max_active_blocks_per_multiprocessor(256, 0)?;
        let fit = sms * per_sm;
        let din = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
        let mut out = DeviceBuffer::<u32>::zeroed(ctx, 1)?;
        let config = LaunchConfig::linear(fit + 1, 256).with_cooperative();
        let e = ctx
            .new_stream()?
            .scope(|s| s.launch(&sum, config, (&din, &mut out)))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::CooperativeLaunchTooLarge, "{e}");
        assert_eq!(e.call(), "StreamScope::launch");
        assert_eq!(
            e.detail().unwrap(),
            format!(
                "a cooperative launch needs every block resident at once: the grid [{}, 1, 1] \
                 has {} blocks, but at most {per_sm} blocks of 256 threads with 0 bytes of \
                 dynamic shared memory fit on each of the {sms} multiprocessors, {fit} in all \
                 (cuOccupancyMaxActiveBlocksPerMultiprocessor)",
                fit + 1,
                fit + 1
            )
        );
        Ok(())
    });
}

fn a_launch_priority_is_accepted_and_one_out_of_range_refused() {
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let range = ctx.stream_priority_range()?;
        let stream = ctx.new_stream()?;
        let mut x = ctx.from_slice(&[1.0f32, 2.0])?;
        if driver() < 12000 {
            let config = LaunchConfig::linear(1, 32).with_priority(range.greatest);
            let e = stream
                .scope(|s| s.launch(&scale, config, (&mut x, 2.0f32)))
                .unwrap_err();
            assert_eq!(e.code(), ErrorCode::DriverTooOld, "{e}");
            common::skip(format!(
                "launch priorities need a CUDA 12.0 driver, this one is {}",
                driver()
            ));
        }
        stream.scope(|s| {
            let x = s.bind_mut(&mut x);
            for priority in [range.greatest, range.least] {
                let config = LaunchConfig::linear(1, 32).with_priority(priority);
                s.launch(&scale, config, (x, 2.0f32))?;
            }
            Ok::<_, cuda_brand::Error>(())
        })?;
        assert_eq!(x.to_vec()?, [4.0, 8.0]);
        let config = LaunchConfig::linear(1, 32).with_priority(range.greatest - 1);
        let e = stream
            .scope(|s| s.launch(&scale, config, (&mut x, 2.0f32)))
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidInput);
        assert_eq!(
            e.invalid().unwrap().to_string(),
            format!(
                "launch priority {} is outside the context's range {} (highest) to {} (lowest)",
                range.greatest - 1,
                range.greatest,
                range.least
            )
        );
        assert_eq!(x.to_vec()?, [4.0, 8.0], "the refused launch did not run");
        Ok(())
    });
}

fn attribute_launches_are_ordered_like_others_in_a_two_stream_scope() {
    if driver() < 12000 {
        common::skip(format!(
            "launch priorities need a CUDA 12.0 driver, this one is {}",
            driver()
        ));
    }
    common::in_context(|ctx| {
        let module = Module::from_ptx(ctx, PTX)?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let range = ctx.stream_priority_range()?;
        let (a, b) = (
            Stream::new(ctx, StreamFlags::NonBlocking)?,
            Stream::new(ctx, StreamFlags::NonBlocking)?,
        );
        let n = 1 << 22;
        let mut x = ctx.from_slice(&vec![1.0f32; n])?;
        let mut back = vec![0.0f32; n];
        let config = scale.config_for(n)?.with_priority(range.greatest);
        a.scope_pair(&b, |sa, sb| {
            let x = sa.bind_mut(&mut x);
            sa.launch(&scale, config, (x, 3.0f32))?;
            // b reads what a's launch wrote: the lane record makes it wait for it
            sb.copy_to_host(&mut back, x.into_ref())
        })?;
        assert!(back.iter().all(|&v| v == 3.0), "{:?}", &back[..4]);
        Ok(())
    });
}

// ---- error codes ---------------------------------------------------------------------

fn the_nvrtc_codes_read_like_the_drivers() {
    assert_eq!(ErrorCode::NvrtcNotFound.raw(), None);
    assert_eq!(
        ErrorCode::NvrtcNotFound.to_string(),
        "CUDA_BRAND_NVRTC_NOT_FOUND (NVRTC library not found)"
    );
    assert_eq!(ErrorCode::Nvrtc(6).raw(), None);
    assert_eq!(
        ErrorCode::Nvrtc(6).to_string(),
        "NVRTC_ERROR_COMPILATION (compilation failed)"
    );
    assert_eq!(
        ErrorCode::Nvrtc(99).to_string(),
        "NVRTC_ERROR_UNRECOGNIZED 99 (a result code this version of cuda-brand does not know)"
    );
    // no CUresult maps to them
    for raw in 0..=1000 {
        assert!(!matches!(
            ErrorCode::from_raw(raw),
            Some(ErrorCode::NvrtcNotFound | ErrorCode::Nvrtc(_))
        ));
    }
}

// ---- NVRTC ---------------------------------------------------------------------------

#[cfg(feature = "nvrtc")]
mod nvrtc_tests {
    use super::*;
    use cuda_brand::ComputeCapability;
    use cuda_brand::nvrtc::{CompileOptions, Program};

    pub const SOURCE: &str = r#"#include "scale.h"

extern "C" __global__ void add_n(float *x, size_t x_len, float n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < x_len;
         i += (size_t)gridDim.x * blockDim.x) {
        x[i] = x[i] * SCALE + n + HEADER_OFFSET;
    }
}

template <typename T>
__global__ void fill(T *x, size_t x_len, T v) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < x_len) x[i] = v;
}
"#;

    pub fn options() -> CompileOptions {
        CompileOptions::new()
            .name("kernel.cu")
            .std("c++17")
            .define_value("SCALE", "2.0f")
            .header("scale.h", "#define HEADER_OFFSET 0.25f\n")
            .name_expression("fill<int>")
    }

    /// Returns if NVRTC loads; otherwise skips the test, naming the loader's error.
    pub fn needs_nvrtc() {
        if let Err(e) = cuda_brand::nvrtc::version() {
            assert_eq!(e.code(), ErrorCode::NvrtcNotFound, "{e}");
            common::skip(format!("no NVRTC library ({e})"));
        }
    }

    /// Runs everywhere NVRTC is installed: compiling needs no GPU.
    pub fn nvrtc_compiles_source_to_ptx_without_a_context() {
        needs_nvrtc();
        let program = Program::compile(
            SOURCE,
            &options().arch(ComputeCapability { major: 7, minor: 5 }),
        )
        .unwrap();
        let ptx = program.ptx().unwrap();
        assert!(ptx.contains(".visible .entry add_n("), "{ptx}");
        assert!(ptx.contains(".target sm_75"), "{ptx}");
        assert_eq!(program.cubin(), None, "compute_75 is virtual: PTX only");
        let mangled = program.lowered_name("fill<int>").unwrap();
        assert_eq!(mangled, "_Z4fillIiEvPT_mS0_");
        assert!(ptx.contains(mangled));
        assert_eq!(program.lowered_name("fill<float>"), None);
        // a real architecture gives a cubin too
        let program = Program::compile(
            SOURCE,
            &options()
                .arch(ComputeCapability { major: 8, minor: 0 })
                .cubin(true),
        )
        .unwrap();
        assert_eq!(&program.cubin().unwrap()[..4], b"\x7fELF");
    }

    /// Runs everywhere NVRTC is installed.
    pub fn nvrtc_a_syntax_error_returns_the_log_naming_the_line() {
        needs_nvrtc();
        let broken = "extern \"C\" __global__ void k(float *x, size_t n) {\n    x[0] = 1.0f\n}\n";
        let e = Program::compile(broken, &CompileOptions::new().name("broken.cu")).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Nvrtc(6), "{e}");
        assert_eq!(e.call(), "nvrtcCompileProgram");
        let log = e.detail().unwrap();
        println!("{e}");
        assert!(log.starts_with("compile log:\n"), "{log}");
        assert!(
            log.contains("broken.cu(3): error"),
            "the log names the line: {log}"
        );
        // an option NVRTC does not take
        let e = Program::compile(SOURCE, &options().option("--no-such-option")).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Nvrtc(5), "{e}");
        assert!(e.detail().unwrap().contains("--no-such-option"), "{e}");
    }

    /// Set in the child process `nvrtc_a_missing_library_is_a_clear_error` starts: the
    /// library is loaded once per process, so the override must come first.
    const CHILD: &str = "CUDA_BRAND_TEST_NVRTC_CHILD";
    const MISSING: &str = "/nonexistent/libnvrtc.so";

    /// Runs everywhere (in a child process with `CUDA_BRAND_NVRTC_LIBRARY` pointing nowhere).
    pub fn nvrtc_a_missing_library_is_a_clear_error() {
        if std::env::var_os(CHILD).is_some() {
            let e = Program::compile(SOURCE, &options()).unwrap_err();
            assert_eq!(e.code(), ErrorCode::NvrtcNotFound, "{e}");
            let text = e.to_string();
            assert!(
                text.starts_with(&format!(
                    "loading the NVRTC library failed: CUDA_BRAND_NVRTC_NOT_FOUND (NVRTC \
                     library not found): CUDA_BRAND_NVRTC_LIBRARY={MISSING} could not be \
                     loaded ({MISSING}: "
                )),
                "{text}"
            );
            assert!(
                text.ends_with("point it at libnvrtc, or unset it"),
                "{text}"
            );
            assert_eq!(cuda_brand::nvrtc::version().unwrap_err(), e);
            println!("child saw: {text}");
            return;
        }
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "nvrtc_a_missing_library_is_a_clear_error",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CUDA_BRAND_NVRTC_LIBRARY", MISSING)
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success()
                && stdout.contains("1 passed")
                && stdout.contains("child saw: "),
            "child process failed:\n{stdout}\n{stderr}"
        );
    }

    pub fn nvrtc_compiled_kernels_run_from_ptx_and_from_a_cubin() {
        needs_nvrtc();
        common::in_context(|ctx| {
            // compiled for this context's device and loaded
            let (module, program) = ctx.compile_and_load(SOURCE, &options())?;
            println!("log: {:?}", program.log());
            // SAFETY: add_n(float*, size_t, float) writes x[i] for i < x_len only.
            let add_n = unsafe { module.kernel::<(Out<f32>, f32)>("add_n") }?;
            if driver() >= 12040 {
                // read without a driver error: the count from NVRTC's PTX (or the driver)
                let params = add_n.function().params()?;
                let layout: Vec<_> = params.iter().map(|p| (p.offset, p.size)).collect();
                assert_eq!(
                    layout,
                    [(0, 8), (8, 8), (16, 4)],
                    "add_n(float*, size_t, float)"
                );
            }
            let mut x = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
            let stream = ctx.new_stream()?;
            stream.scope(|s| s.launch(&add_n, LaunchConfig::linear(1, 32), (&mut x, 1.0f32)))?;
            assert_eq!(x.to_vec()?, [3.25, 5.25, 7.25]);
            // the template, by its mangled name
            let fill_name = program.lowered_name("fill<int>").unwrap();
            // SAFETY: fill<int>(int*, size_t, int) writes x[i] for i < x_len only.
            let fill = unsafe { module.kernel::<(Out<i32>, i32)>(fill_name) }?;
            let mut y = DeviceBuffer::<i32>::zeroed(ctx, 40)?;
            stream.scope(|s| s.launch(&fill, LaunchConfig::linear(2, 32), (&mut y, -5i32)))?;
            assert_eq!(y.to_vec()?, vec![-5; 40]);
            // a cubin for the device's own architecture (if this NVRTC knows it): no JIT
            let cc = ctx.device()?.compute_capability()?;
            let known = cuda_brand::nvrtc::supported_archs()?;
            if known.contains(&(cc.major * 10 + cc.minor)) {
                let program = Program::compile(SOURCE, &options().arch(cc).cubin(true))?;
                assert!(program.cubin().is_some());
                let module = program.load(ctx)?;
                // SAFETY: as above.
                let add_n = unsafe { module.kernel::<(Out<f32>, f32)>("add_n") }?;
                assert_eq!(add_n.function().binary_version()?, cc.major * 10 + cc.minor);
                if driver() >= 12040 {
                    // the count from NVRTC's cubin (its .nv.info records), or the driver
                    let params = add_n.function().params()?;
                    let layout: Vec<_> = params.iter().map(|p| (p.offset, p.size)).collect();
                    assert_eq!(layout, [(0, 8), (8, 8), (16, 4)]);
                }
                stream
                    .scope(|s| s.launch(&add_n, LaunchConfig::linear(1, 32), (&mut x, 0.0f32)))?;
                assert_eq!(x.to_vec()?, [6.75, 10.75, 14.75]);
            }
            Ok(())
        });
    }
}

#[cfg(feature = "nvrtc")]
use nvrtc_tests::*;

#[cfg(feature = "nvrtc")]
gpu_tests!(
    jit_options_reach_the_compiler_and_its_info_log_comes_back,
    jit_without_optimization_and_with_debug_information_computes_the_same,
    a_fatbin_loads_with_options_and_uses_its_exact_binary,
    a_broken_ptx_with_options_reports_the_error_log_naming_the_line,
    a_library_is_loaded_once_and_used_by_two_contexts,
    a_library_from_a_checked_cubin_runs_on_hopper,
    a_missing_library_kernel_is_an_error_naming_it,
    declarations_are_checked_against_the_kernels_parameters,
    a_ptx_signature_behind_preprocessor_directives_is_checked_as_ptxas_reads_it,
    every_load_path_reads_each_kernels_parameters_without_a_driver_error,
    a_cluster_launch_gives_each_block_its_rank_in_the_cluster,
    cluster_launches_are_checked_before_the_driver,
    a_cooperative_launch_synchronizes_its_whole_grid,
    a_cooperative_grid_too_large_is_refused_before_the_driver,
    a_launch_priority_is_accepted_and_one_out_of_range_refused,
    attribute_launches_are_ordered_like_others_in_a_two_stream_scope,
    nvrtc_compiled_kernels_run_from_ptx_and_from_a_cubin;
    anywhere: [
        jit_values_the_driver_would_misread_are_refused_before_it,
        a_damaged_library_image_is_refused_before_the_driver,
        the_nvrtc_codes_read_like_the_drivers,
        nvrtc_compiles_source_to_ptx_without_a_context,
        nvrtc_a_syntax_error_returns_the_log_naming_the_line,
        nvrtc_a_missing_library_is_a_clear_error,
    ];
    no_gpu: [without_a_device_a_library_reports_the_drivers_error]
);

#[cfg(not(feature = "nvrtc"))]
gpu_tests!(
    jit_options_reach_the_compiler_and_its_info_log_comes_back,
    jit_without_optimization_and_with_debug_information_computes_the_same,
    a_fatbin_loads_with_options_and_uses_its_exact_binary,
    a_broken_ptx_with_options_reports_the_error_log_naming_the_line,
    a_library_is_loaded_once_and_used_by_two_contexts,
    a_library_from_a_checked_cubin_runs_on_hopper,
    a_missing_library_kernel_is_an_error_naming_it,
    declarations_are_checked_against_the_kernels_parameters,
    a_ptx_signature_behind_preprocessor_directives_is_checked_as_ptxas_reads_it,
    every_load_path_reads_each_kernels_parameters_without_a_driver_error,
    a_cluster_launch_gives_each_block_its_rank_in_the_cluster,
    cluster_launches_are_checked_before_the_driver,
    a_cooperative_launch_synchronizes_its_whole_grid,
    a_cooperative_grid_too_large_is_refused_before_the_driver,
    a_launch_priority_is_accepted_and_one_out_of_range_refused,
    attribute_launches_are_ordered_like_others_in_a_two_stream_scope;
    anywhere: [
        jit_values_the_driver_would_misread_are_refused_before_it,
        a_damaged_library_image_is_refused_before_the_driver,
        the_nvrtc_codes_read_like_the_drivers,
    ];
    no_gpu: [without_a_device_a_library_reports_the_drivers_error]
);
