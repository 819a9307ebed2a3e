//! Tests that need no GPU: the error mapping, the flags, and every path that meets a
//! machine without a device. Such a machine is in one of two states, told apart by whether
//! the driver library loads (found as the crate finds it, see
//! `common::load_driver_library`):
//!
//! - no driver library (a fresh machine, or `CUDA_BRAND_DRIVER_LIBRARY=/nonexistent`):
//!   every entry point returns `DriverNotFound`, with a message saying how to get one;
//! - a driver library but no GPU (Debian's `libcuda1`, `scripts/install-libcuda`): `cuInit`
//!   returns `CUDA_ERROR_NO_DEVICE`.
//!
//! On a GPU machine neither path can be taken, and those tests skip.

use crate::common;

use cuda_brand::{
    CacheConfig, ContextFlags, Device, Error, ErrorCode, Scheduling, SharedMemoryConfig,
    StreamPriorityRange,
};
use cuda_driver_sys::CUresult;

fn every_code_of_the_bindings_maps_to_its_own_name() {
    let all = [
        CUresult::CUDA_ERROR_INVALID_VALUE,
        CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        CUresult::CUDA_ERROR_NOT_INITIALIZED,
        CUresult::CUDA_ERROR_DEINITIALIZED,
        CUresult::CUDA_ERROR_PROFILER_DISABLED,
        CUresult::CUDA_ERROR_PROFILER_NOT_INITIALIZED,
        CUresult::CUDA_ERROR_PROFILER_ALREADY_STARTED,
        CUresult::CUDA_ERROR_PROFILER_ALREADY_STOPPED,
        CUresult::CUDA_ERROR_NO_DEVICE,
        CUresult::CUDA_ERROR_INVALID_DEVICE,
        CUresult::CUDA_ERROR_INVALID_IMAGE,
        CUresult::CUDA_ERROR_INVALID_CONTEXT,
        CUresult::CUDA_ERROR_CONTEXT_ALREADY_CURRENT,
        CUresult::CUDA_ERROR_MAP_FAILED,
        CUresult::CUDA_ERROR_UNMAP_FAILED,
        CUresult::CUDA_ERROR_ARRAY_IS_MAPPED,
        CUresult::CUDA_ERROR_ALREADY_MAPPED,
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
        CUresult::CUDA_ERROR_ALREADY_ACQUIRED,
        CUresult::CUDA_ERROR_NOT_MAPPED,
        CUresult::CUDA_ERROR_NOT_MAPPED_AS_ARRAY,
        CUresult::CUDA_ERROR_NOT_MAPPED_AS_POINTER,
        CUresult::CUDA_ERROR_ECC_UNCORRECTABLE,
        CUresult::CUDA_ERROR_UNSUPPORTED_LIMIT,
        CUresult::CUDA_ERROR_CONTEXT_ALREADY_IN_USE,
        CUresult::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
        CUresult::CUDA_ERROR_INVALID_PTX,
        CUresult::CUDA_ERROR_INVALID_GRAPHICS_CONTEXT,
        CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE,
        CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND,
        CUresult::CUDA_ERROR_INVALID_SOURCE,
        CUresult::CUDA_ERROR_FILE_NOT_FOUND,
        CUresult::CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND,
        CUresult::CUDA_ERROR_SHARED_OBJECT_INIT_FAILED,
        CUresult::CUDA_ERROR_OPERATING_SYSTEM,
        CUresult::CUDA_ERROR_INVALID_HANDLE,
        CUresult::CUDA_ERROR_ILLEGAL_STATE,
        CUresult::CUDA_ERROR_NOT_FOUND,
        CUresult::CUDA_ERROR_NOT_READY,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        CUresult::CUDA_ERROR_LAUNCH_TIMEOUT,
        CUresult::CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING,
        CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        CUresult::CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE,
        CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED,
        CUresult::CUDA_ERROR_ASSERT,
        CUresult::CUDA_ERROR_TOO_MANY_PEERS,
        CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR,
        CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
        CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE,
        CUresult::CUDA_ERROR_INVALID_PC,
        CUresult::CUDA_ERROR_LAUNCH_FAILED,
        CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
        CUresult::CUDA_ERROR_NOT_PERMITTED,
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        CUresult::CUDA_ERROR_SYSTEM_NOT_READY,
        CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH,
        CUresult::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_MERGE,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
        CUresult::CUDA_ERROR_CAPTURED_EVENT,
        CUresult::CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
        CUresult::CUDA_ERROR_TIMEOUT,
        CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
        CUresult::CUDA_ERROR_UNKNOWN,
    ];
    for r in all {
        let code = ErrorCode::from_raw(r as u32).unwrap();
        assert!(
            !matches!(code, ErrorCode::Unrecognized(_)),
            "{r:?} is not named"
        );
        assert_eq!(code.name(), format!("{r:?}"));
        assert_eq!(code.raw(), Some(r as u32));
    }
}

fn raw_values_round_trip_and_success_is_not_an_error() {
    assert_eq!(ErrorCode::from_raw(0), None);
    for &code in ErrorCode::ALL {
        assert_eq!(code.raw().and_then(ErrorCode::from_raw), Some(code));
        assert!(code.name().starts_with("CUDA_ERROR_"), "{}", code.name());
        assert!(!code.description().is_empty());
    }
    // codes newer than the bindings are named too
    assert_eq!(
        ErrorCode::from_raw(222),
        Some(ErrorCode::UnsupportedPtxVersion)
    );
    assert_eq!(ErrorCode::from_raw(34), Some(ErrorCode::StubLibrary));
}

fn unknown_codes_are_kept_not_lost() {
    let code = ErrorCode::from_raw(4242).unwrap();
    assert_eq!(code, ErrorCode::Unrecognized(4242));
    assert_eq!(code.raw(), Some(4242));
    let e = Error::new("cuFuture", code);
    assert_eq!(
        e.to_string(),
        "cuFuture failed: CUDA_ERROR_UNRECOGNIZED 4242 (a result code this version of cuda-brand does not know)"
    );
}

fn display_names_the_call_the_code_and_the_description() {
    let e = Error::new("cuMemAlloc_v2", ErrorCode::OutOfMemory);
    assert_eq!(
        e.to_string(),
        "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"
    );
    assert_eq!(e.call(), "cuMemAlloc_v2");
    assert_eq!(e.code(), ErrorCode::OutOfMemory);
    assert_eq!(e.detail(), None);
    let e = Error::with_detail(
        "cuModuleLoadDataEx",
        ErrorCode::InvalidPtx,
        "ptxas fatal: line 3",
    );
    assert_eq!(
        e.to_string(),
        "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed): ptxas fatal: line 3"
    );
    assert_eq!(e.detail(), Some("ptxas fatal: line 3"));
}

fn context_flags_set_and_clear_each_bit() {
    let f = ContextFlags::new();
    assert_eq!(f.bits(), 0);
    assert_eq!(f, ContextFlags::default());
    for (s, bits) in [
        (Scheduling::Auto, 0),
        (Scheduling::Spin, 1),
        (Scheduling::Yield, 2),
        (Scheduling::BlockingSync, 4),
    ] {
        let f = ContextFlags::new()
            .map_host(true)
            .schedule(Scheduling::Spin)
            .schedule(s);
        assert_eq!(f.bits(), bits | 8, "{s:?}");
        assert_eq!(f.scheduling(), s);
    }
    let f = ContextFlags::new().map_host(true).keep_local_memory(true);
    assert_eq!(f.bits(), 0x18);
    assert!(f.maps_host() && f.keeps_local_memory());
    let f = f.map_host(false);
    assert_eq!(f.bits(), 0x10);
    assert!(!f.maps_host() && f.keeps_local_memory());
    // bits the crate does not know survive a round trip through the driver's pattern
    assert_eq!(ContextFlags::from_bits(0x84).bits(), 0x84);
    assert_eq!(
        ContextFlags::from_bits(0x84).scheduling(),
        Scheduling::BlockingSync
    );
}

fn enum_values_match_the_driver() {
    for (c, raw) in [
        (CacheConfig::PreferNone, 0),
        (CacheConfig::PreferShared, 1),
        (CacheConfig::PreferL1, 2),
        (CacheConfig::PreferEqual, 3),
    ] {
        assert_eq!(c.raw(), raw);
        assert_eq!(CacheConfig::from_raw(raw), Some(c));
    }
    assert_eq!(CacheConfig::from_raw(4), None);
    for (c, raw) in [
        (SharedMemoryConfig::DefaultBankSize, 0),
        (SharedMemoryConfig::FourByteBankSize, 1),
        (SharedMemoryConfig::EightByteBankSize, 2),
    ] {
        assert_eq!(c.raw(), raw);
        assert_eq!(SharedMemoryConfig::from_raw(raw), Some(c));
    }
    let range = StreamPriorityRange {
        least: 0,
        greatest: -5,
    };
    assert!(range.contains(0) && range.contains(-5) && range.contains(-2));
    assert!(!range.contains(1) && !range.contains(-6));
}

/// What this machine offers the crate.
#[derive(Debug)]
enum Machine {
    /// No driver library loads; the loader's message.
    NoLibrary(String),
    /// A driver library, and `cuInit` finds no device.
    NoDevice,
    /// A GPU: the no-device paths cannot be taken.
    Gpu,
}

fn machine() -> Machine {
    match common::load_driver_library() {
        Err(why) => Machine::NoLibrary(why),
        Ok(_) => match Device::count() {
            Ok(n) if n > 0 => Machine::Gpu,
            _ => Machine::NoDevice,
        },
    }
}

/// The error every entry point returns on this machine (the harness runs the tests that
/// call this only where there is no GPU).
fn no_device() -> Error {
    match machine() {
        Machine::Gpu => panic!("a GPU is present, so the no-device paths cannot be taken"),
        Machine::NoLibrary(_) | Machine::NoDevice => Device::get(0).unwrap_err(),
    }
}

/// How the "driver library not found" error begins, whatever the platform's loader says.
const NOT_FOUND: &str = "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_NOT_FOUND \
                         (CUDA driver library not found): ";

fn driver_version_needs_no_gpu() {
    match machine() {
        Machine::NoLibrary(why) => {
            let e = cuda_brand::driver_version().unwrap_err();
            assert_eq!(e.code(), ErrorCode::DriverNotFound, "{e} ({why})");
            assert!(e.to_string().starts_with(NOT_FOUND), "{e}");
        }
        Machine::NoDevice | Machine::Gpu => {
            let v = cuda_brand::driver_version().expect("cuDriverGetVersion");
            assert!(
                v >= 11040,
                "driver version {v}, below the minimum (CUDA 11.4)"
            );
        }
    }
}

fn without_a_device_every_entry_point_returns_the_same_error() {
    let e = no_device();
    match machine() {
        Machine::NoLibrary(_) => {
            assert_eq!(e.code(), ErrorCode::DriverNotFound);
            assert_eq!(e.call(), "loading the CUDA driver library");
            let text = e.to_string();
            assert!(text.starts_with(NOT_FOUND), "{text}");
            assert!(
                text.contains("install the NVIDIA driver (CUDA 11.4, R470, or newer)"),
                "{text}"
            );
            assert!(text.contains("scripts/install-libcuda"), "{text}");
            assert_eq!(cuda_brand::driver_version().unwrap_err(), e);
        }
        _ => {
            assert_eq!(e.code(), ErrorCode::NoDevice);
            assert_eq!(
                e.to_string(),
                "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
            );
        }
    }
    assert_eq!(Device::count().unwrap_err(), e);
    assert_eq!(Device::get(0).unwrap_err(), e);
    assert_eq!(Device::all().unwrap_err(), e);
    // the first failure is remembered: asking again gives the same answer, no panic
    assert_eq!(Device::get(7).unwrap_err(), e);
}

// (No test of `with_context` without a device: it takes a `&Device`, and `Device::get`,
// the only way to get one, fails first, as `without_a_device_every_entry_point_returns_the_
// same_error` checks. A test that called `with_context` after it could never reach it.)

/// Set in the child process that `a_missing_library_named_by_the_override_is_driver_not_found`
/// starts (the same test, alone): the driver is loaded once per process, so the override
/// must be in place before anything loads it.
const CHILD: &str = "CUDA_BRAND_TEST_CHILD";
const MISSING: &str = "/nonexistent/libcuda.so.1";

fn a_missing_library_named_by_the_override_is_driver_not_found() {
    if std::env::var_os(CHILD).is_some() {
        // The child, with CUDA_BRAND_DRIVER_LIBRARY=/nonexistent/libcuda.so.1.
        let e = Device::count().unwrap_err();
        assert_eq!(e.code(), ErrorCode::DriverNotFound, "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "{NOT_FOUND}CUDA_BRAND_DRIVER_LIBRARY={MISSING} could not be loaded ("
            )),
            "{text}"
        );
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        assert_eq!(
            text,
            format!(
                "{NOT_FOUND}CUDA_BRAND_DRIVER_LIBRARY={MISSING} could not be loaded ({MISSING}: \
                 cannot open shared object file: No such file or directory): point it at the \
                 driver library, or unset it; install the NVIDIA driver (CUDA 11.4, R470, or \
                 newer), or on Debian without a GPU run cuda-brand's scripts/install-libcuda \
                 (it installs libcuda1, whose cuInit reports no device)"
            )
        );
        assert_eq!(cuda_brand::driver_version().unwrap_err(), e);
        println!("child saw: {text}");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_missing_library_named_by_the_override_is_driver_not_found",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CUDA_BRAND_DRIVER_LIBRARY", MISSING)
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed") && stdout.contains("child saw: "),
        "child process failed:\n{stdout}\n{stderr}"
    );
}

/// The directory of the build's `-lcuda` placeholder (`build.rs`; Linux only), which cargo
/// puts on `LD_LIBRARY_PATH` for `cargo run` and `cargo test`.
const LINK_STUB_DIR: Option<&str> = option_env!("CUDA_BRAND_LINK_STUB_DIR");

/// The README's quote of what `vector_add` prints without a driver library: the ```text
/// block that begins with `error: loading the CUDA driver library failed`.
fn readme_not_found_quote() -> String {
    let readme = include_str!("../README.md");
    let mut blocks = readme.split("```text\n").skip(1);
    let block = blocks
        .find(|b| b.starts_with("error: loading the CUDA driver library failed"))
        .expect("README.md quotes the not-found message in a ```text block");
    let end = block.find("\n```").expect("the ```text block ends");
    block[..end].to_owned()
}

/// Without `CUDA_BRAND_DRIVER_LIBRARY`, in a child process whose `LD_LIBRARY_PATH` holds
/// the build's placeholder directory first (as `cargo run` and `cargo test` set it, and
/// explicitly, so that running the test binary directly checks the same): where no driver
/// library is installed, the message names no placeholder and no "invalid ELF header", and
/// is what the README quotes `vector_add` printing (`error: {e}`, as the example does).
fn the_not_found_message_under_cargo_is_the_readmes_and_names_no_link_stub() {
    if std::env::var_os(CHILD).is_some() {
        let e = match Device::count() {
            Err(e) if e.code() == ErrorCode::DriverNotFound => e,
            other => common::skip(format!(
                "a driver library is installed, so the not-found path cannot be taken \
                 (Device::count: {other:?})"
            )),
        };
        let text = e.to_string();
        for bad in ["stub", "placeholder", "invalid ELF header", "/out/"] {
            assert!(!text.contains(bad), "the message contains {bad:?}: {text}");
        }
        assert!(text.starts_with(NOT_FOUND), "{text}");
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        assert_eq!(
            format!("error: {text}"),
            readme_not_found_quote(),
            "README.md's quote of the not-found message differs from what vector_add prints"
        );
        println!("child saw: {text}");
        return;
    }
    let mut path = std::ffi::OsString::new();
    if let Some(dir) = LINK_STUB_DIR {
        // build.rs always makes it: where it is missing, this binary was copied to another
        // machine (the GPU machine's bundle), which has no build directory to put on the path
        if !std::path::Path::new(dir).is_dir() {
            common::skip(
                "the build's placeholder directory (OUT_DIR/stub) is not on this machine: the \
                 binary was copied from the machine that built it",
            );
        }
        path.push(dir);
    }
    if let Some(inherited) = std::env::var_os("LD_LIBRARY_PATH") {
        if !path.is_empty() {
            path.push(":");
        }
        path.push(inherited);
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_not_found_message_under_cargo_is_the_readmes_and_names_no_link_stub",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove("CUDA_BRAND_DRIVER_LIBRARY")
        .env("LD_LIBRARY_PATH", path)
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // the child skipped (`test NAME ... ignored (REASON)`): so does this test
    if let Some((_, reason)) = stdout.lines().find_map(|l| l.split_once(" ... ignored (")) {
        common::skip(format!("in the child: {}", reason.trim_end_matches(')')));
    }
    assert!(
        output.status.success() && stdout.contains("1 passed") && stdout.contains("child saw: "),
        "child process failed:\n{stdout}\n{stderr}"
    );
}

fn the_crate_codes_have_no_raw_value_and_read_like_the_drivers() {
    for (code, text) in [
        (
            ErrorCode::DriverNotFound,
            "CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver library not found)",
        ),
        (
            ErrorCode::DriverTooOld,
            "CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is too old)",
        ),
    ] {
        assert_eq!(code.raw(), None);
        assert_eq!(code.to_string(), text);
        assert!(!ErrorCode::ALL.contains(&code));
    }
    // no raw value maps to them
    for raw in 0..=1000 {
        assert!(!matches!(
            ErrorCode::from_raw(raw),
            Some(ErrorCode::DriverNotFound | ErrorCode::DriverTooOld)
        ));
    }
}

fn debug_prints_like_display_for_main() {
    let e = Error::new("cuInit", ErrorCode::NoDevice);
    assert_eq!(
        format!("{e:?}"),
        "cuInit failed: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"
    );
    let e = Error::with_detail("cuModuleLoadDataEx", ErrorCode::InvalidPtx, "line 3");
    assert_eq!(format!("{e:?}"), e.to_string());
}

fn a_null_raw_context_is_an_error() {
    // SAFETY: a null handle is rejected before any driver call.
    let result =
        unsafe { cuda_brand::with_raw_context(std::ptr::null_mut(), |ctx| ctx.api_version()) };
    let e = result.unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidContext);
    assert_eq!(e.call(), "with_raw_context");
}

fn the_sticky_codes_are_those_cuda_h_says_poison_the_context() {
    use ErrorCode::*;
    // cuda.h: "This leaves the process in an inconsistent state ... the process must be
    // terminated and relaunched" (and for CUDA_ERROR_ASSERT: "The context cannot be used
    // anymore"); uncorrectable ECC and NVLink errors counted too (see `is_sticky`)
    let sticky = [
        EccUncorrectable,
        NvlinkUncorrectable,
        Contained,
        IllegalAddress,
        LaunchTimeout,
        Assert,
        HardwareStackError,
        IllegalInstruction,
        MisalignedAddress,
        InvalidAddressSpace,
        InvalidPc,
        LaunchFailed,
        TensorMemoryLeak,
        MpsClientTerminated,
        ExternalDevice,
    ];
    for &code in ErrorCode::ALL {
        assert_eq!(code.is_sticky(), sticky.contains(&code), "{code}");
    }
    let raws: Vec<u32> = sticky.iter().map(|c| c.raw().unwrap()).collect();
    assert_eq!(
        raws,
        [
            214, 220, 226, 700, 702, 710, 714, 715, 716, 717, 718, 719, 721, 810, 911
        ]
    );
    assert!(!ContextIsDestroyed.is_sticky());
    assert!(!Unrecognized(4242).is_sticky() && !DriverNotFound.is_sticky());
}

fn a_closure_error_and_its_teardown_error_print_together() {
    let closure = Error::new("my step", ErrorCode::InvalidValue);
    let sync = Error::new("cuCtxSynchronize", ErrorCode::IllegalAddress);
    let report = Error::with_detail(
        "cuMemFreeAsync",
        ErrorCode::IllegalAddress,
        "`DeviceBuffer::drop` failed: the first of 2 handles whose release failed in `drop`",
    );
    let e = closure
        .clone()
        .with_teardown_error(sync.clone())
        .with_teardown_error(report.clone());
    assert_eq!(e.call(), "my step");
    assert_eq!(
        e.teardown_error().map(Error::call),
        Some("cuCtxSynchronize")
    );
    assert_eq!(e.teardown_errors().cloned().collect::<Vec<_>>().len(), 2);
    assert_eq!(e.teardown_errors().nth(1), Some(&report));
    assert_eq!(
        e.to_string(),
        "my step failed: CUDA_ERROR_INVALID_VALUE (invalid argument); also, during teardown: \
         cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered); \
         also, during teardown: cuMemFreeAsync failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory \
         access was encountered): `DeviceBuffer::drop` failed: the first of 2 handles whose release \
         failed in `drop`"
    );
    assert!(e.is_sticky());
    // any error type, through `WithTeardown`
    let w = cuda_brand::WithTeardown::new(anyhow::anyhow!("mine"), Some(sync.clone()));
    assert_eq!(
        w.to_string(),
        "mine; also, during teardown: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"
    );
    assert_eq!(w.teardown_error(), Some(&sync));
    let (mine, teardown) = w.into_parts();
    assert_eq!(
        (mine.to_string(), teardown),
        ("mine".to_owned(), Some(sync.clone()))
    );
    // and back into one `Error`
    let one = cuda_brand::WithTeardown::new(closure.clone(), Some(sync.clone())).into_combined();
    assert_eq!(one, closure.with_teardown_error(sync));
}

gpu_tests!(; anywhere: [every_code_of_the_bindings_maps_to_its_own_name, raw_values_round_trip_and_success_is_not_an_error, unknown_codes_are_kept_not_lost, display_names_the_call_the_code_and_the_description, context_flags_set_and_clear_each_bit, enum_values_match_the_driver, driver_version_needs_no_gpu, a_missing_library_named_by_the_override_is_driver_not_found, the_not_found_message_under_cargo_is_the_readmes_and_names_no_link_stub, the_crate_codes_have_no_raw_value_and_read_like_the_drivers, debug_prints_like_display_for_main, a_null_raw_context_is_an_error, the_sticky_codes_are_those_cuda_h_says_poison_the_context, a_closure_error_and_its_teardown_error_print_together]; no_gpu: [without_a_device_every_entry_point_returns_the_same_error]);
