//! The table without a GPU: a fake table, the installed driver library (if any), and
//! what each missing entry point or library says.

use super::*;

#[test]
fn an_optional_entry_point_the_driver_lacks_is_an_error_naming_both_versions() {
    let api = Api::fake(11040);
    // SAFETY: the fake table reaches no driver.
    let e = unsafe {
        api.cuGraphExecUpdate_v2(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
    .unwrap_err();
    assert_eq!(e.code(), ErrorCode::DriverTooOld);
    assert_eq!(e.call(), "cuGraphExecUpdate_v2");
    assert_eq!(
        e.to_string(),
        "cuGraphExecUpdate_v2 failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is too old): \
         cuGraphExecUpdate_v2 needs a CUDA 12.0 driver (R525 or newer); this driver is \
         CUDA 11.4"
    );
    // libraries (CUDA 12.0): the same error, naming the entry point
    // SAFETY: the fake table reaches no driver.
    let e = unsafe {
        api.cuLibraryLoadData(
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }
    .unwrap_err();
    assert_eq!(
        e.detail(),
        Some(
            "cuLibraryLoadData needs a CUDA 12.0 driver (R525 or newer); this driver is \
             CUDA 11.4"
        )
    );
    // a required entry point is called (the fake returns FAKE_RESULT)
    let mut current = std::ptr::null_mut();
    // SAFETY: the fake table reaches no driver.
    let result = unsafe { api.cuCtxGetCurrent(&mut current) };
    assert_eq!(result, Ok(FAKE_RESULT));
    // every optional entry point of the fake is absent, and each says why
    // (newer than the minimum, or, for one feature alone, older: `cuCtxSetCurrent`)
    let optional = api.optional_entries();
    let of_features = usize::from(cfg!(feature = "nccl"));
    assert_eq!(optional.len(), 17 + of_features, "{optional:?}");
    assert!(optional.iter().all(|&(_, _, present)| !present));
    let older: Vec<_> = optional
        .iter()
        .filter(|&&(_, since, _)| since <= MINIMUM_DRIVER)
        .map(|&(name, _, _)| name)
        .collect();
    assert_eq!(older.len(), of_features, "{older:?}");
    let e = Api::fake(11000).lacks("cuMemAllocAsync", 11020);
    assert_eq!(
        e.detail(),
        Some("cuMemAllocAsync needs a CUDA 11.2 driver (R460 or newer); this driver is CUDA 11.0")
    );
}

/// An entry point that only a feature calls is optional even where every driver of the
/// minimum has it: a library without it loads, and the feature's first call is the
/// error naming it.
#[test]
fn an_entry_point_a_new_enough_driver_lacks_is_an_error_naming_it_at_first_use() {
    let e = Api::fake(13000).lacks("cuCtxSetCurrent", 4000);
    assert_eq!(e.code(), ErrorCode::DriverTooOld);
    assert_eq!(e.call(), "cuCtxSetCurrent");
    assert_eq!(
        e.detail(),
        Some(
            "this driver (CUDA 13.0) has no cuCtxSetCurrent, which every driver of CUDA 4.0 or newer has"
        )
    );
    #[cfg(feature = "nccl")]
    {
        // SAFETY: the fake table reaches no driver.
        let e = unsafe { Api::fake(13000).cuCtxSetCurrent(std::ptr::null_mut()) }.unwrap_err();
        assert_eq!(e.call(), "cuCtxSetCurrent");
        assert_eq!(
            e.detail(),
            Some(
                "this driver (CUDA 13.0) has no cuCtxSetCurrent, which every driver of CUDA 4.0 or newer has"
            )
        );
    }
}

#[test]
fn a_driver_without_green_contexts_names_the_first_entry_point_and_version_missing() {
    // before CUDA 12.4: none of them
    let e = Api::fake(12030).green_entries().unwrap_err();
    assert_eq!(e.code(), ErrorCode::DriverTooOld);
    assert_eq!(
        e.to_string(),
        "cuDeviceGetDevResource failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is too old): \
         cuDeviceGetDevResource needs a CUDA 12.4 driver (R550 or newer); this driver is \
         CUDA 12.3"
    );
    // CUDA 12.4 has the split and the contexts, not their streams (12.5)
    let mut api = Api::fake(12040);
    unsafe extern "C" fn present_get(_: CUdevice, _: *mut CUdevResource, _: c_int) -> u32 {
        0
    }
    unsafe extern "C" fn present_split(
        _: *mut CUdevResource,
        _: *mut c_uint,
        _: *const CUdevResource,
        _: *mut CUdevResource,
        _: c_uint,
        _: c_uint,
    ) -> u32 {
        0
    }
    unsafe extern "C" fn present_desc(
        _: *mut CUdevResourceDesc,
        _: *mut CUdevResource,
        _: c_uint,
    ) -> u32 {
        0
    }
    unsafe extern "C" fn present_create(
        _: *mut CUgreenCtx,
        _: CUdevResourceDesc,
        _: CUdevice,
        _: c_uint,
    ) -> u32 {
        0
    }
    unsafe extern "C" fn present_destroy(_: CUgreenCtx) -> u32 {
        0
    }
    unsafe extern "C" fn present_from(_: *mut CUcontext, _: CUgreenCtx) -> u32 {
        0
    }
    unsafe extern "C" fn present_green_get(_: CUgreenCtx, _: *mut CUdevResource, _: c_int) -> u32 {
        0
    }
    api.cuDeviceGetDevResource = Some(present_get);
    api.cuDevSmResourceSplitByCount = Some(present_split);
    api.cuDevResourceGenerateDesc = Some(present_desc);
    api.cuGreenCtxCreate = Some(present_create);
    api.cuGreenCtxDestroy = Some(present_destroy);
    api.cuCtxFromGreenCtx = Some(present_from);
    api.cuGreenCtxGetDevResource = Some(present_green_get);
    assert_eq!(
        api.green_entries().unwrap_err().detail(),
        Some(
            "cuGreenCtxStreamCreate needs a CUDA 12.5 driver (R555 or newer); this driver \
             is CUDA 12.4"
        )
    );
}

#[test]
fn versions_read_as_cuda_writes_them() {
    assert_eq!(cuda_version(11040), "CUDA 11.4");
    assert_eq!(cuda_version(12020), "CUDA 12.2");
    assert_eq!(cuda_version(13000), "CUDA 13.0");
    assert_eq!(cuda_version(0), "of an unknown version");
    assert_eq!(
        driver_for(MINIMUM_DRIVER),
        "a CUDA 11.4 driver (R470 or newer)"
    );
    assert_eq!(driver_for(12040), "a CUDA 12.4 driver (R550 or newer)");
    assert_eq!(driver_for(12070), "a CUDA 12.7 driver or newer");
}

#[test]
fn a_missing_library_is_driver_not_found_with_how_to_get_one() {
    let Err(e) = Api::load(Some(OsStr::new("/nonexistent/libcuda.so.1"))) else {
        panic!("/nonexistent/libcuda.so.1 loaded");
    };
    assert_eq!(e.code(), ErrorCode::DriverNotFound);
    assert_eq!(e.call(), "loading the CUDA driver library");
    let text = e.to_string();
    for part in [
        "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver \
         library not found): CUDA_BRAND_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 could not \
         be loaded (",
        "install the NVIDIA driver (CUDA 11.4, R470, or newer)",
        "scripts/install-libcuda",
    ] {
        assert!(text.contains(part), "{text}");
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    assert_eq!(
        text,
        "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver \
         library not found): CUDA_BRAND_DRIVER_LIBRARY=/nonexistent/libcuda.so.1 could not \
         be loaded (/nonexistent/libcuda.so.1: cannot open shared object file: No such file \
         or directory): point it at the driver library, or unset it; install the NVIDIA \
         driver (CUDA 11.4, R470, or newer), or on Debian without a GPU run cuda-brand's \
         scripts/install-libcuda (it installs libcuda1, whose cuInit reports no device)"
    );
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_library_without_a_required_entry_point_is_driver_too_old_naming_it() {
    // The C library loads everywhere and has no CUDA entry points.
    let Err(e) = Api::load(Some(OsStr::new("libc.so.6"))) else {
        panic!("libc.so.6 passed for a CUDA driver");
    };
    assert_eq!(
        e.to_string(),
        "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is \
         too old): libc.so.6 has no cuDriverGetVersion: cuda-brand needs a CUDA 11.4 driver \
         (R470 or newer); this driver is of an unknown version"
    );
    assert_eq!(
        lacks_required("libcuda.so.1", "cuGraphInstantiateWithFlags", 11030).to_string(),
        "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_TOO_OLD (CUDA driver is \
         too old): libcuda.so.1 has no cuGraphInstantiateWithFlags: cuda-brand needs a CUDA \
         11.4 driver (R470 or newer); this driver is CUDA 11.3"
    );
}

/// With a driver library installed (this crate's CI installs Debian's libcuda1, no GPU
/// needed), checks the real table; without one, that the load failed as it should.
#[test]
fn the_installed_driver_lacks_only_entry_points_newer_than_it() {
    let api = match api() {
        Ok(api) => api,
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::DriverNotFound, "{e}");
            eprintln!("no driver library: the load failed as it should ({e})");
            return;
        }
    };
    assert!(api.version >= MINIMUM_DRIVER, "driver {}", api.version);
    for (name, since, present) in api.optional_entries() {
        assert!(
            present || api.version < since,
            "a CUDA {} driver lacks {name} (CUDA {since})",
            api.version
        );
    }
    if api.cuFuncGetParamInfo.is_none() {
        let (mut offset, mut size) = (0, 0);
        // SAFETY: the entry point is absent, so nothing reaches the driver.
        let e = unsafe { api.cuFuncGetParamInfo(std::ptr::null_mut(), 0, &mut offset, &mut size) }
            .unwrap_err();
        assert_eq!(
            e.detail(),
            Some(
                format!(
                    "cuFuncGetParamInfo needs a CUDA 12.4 driver (R550 or newer); this \
                     driver is {}",
                    cuda_version(api.version)
                )
                .as_str()
            )
        );
    }
}

#[cfg(not(windows))]
#[test]
fn without_the_variable_the_not_found_text_names_both_files_and_the_variable() {
    let failures = "libcuda.so.1: cannot open shared object file: No such file or \
                    directory; libcuda.so: cannot open shared object file: No such file \
                    or directory";
    let detail = driver_not_found(&NotFound {
        file: None,
        failures: failures.to_owned(),
    });
    // what README.md quotes `vector_add` printing
    assert_eq!(
        Error::with_detail(Error::LOAD_DRIVER, ErrorCode::DriverNotFound, detail).to_string(),
        "loading the CUDA driver library failed: CUDA_BRAND_DRIVER_NOT_FOUND (CUDA driver \
         library not found): libcuda.so.1 and libcuda.so could not be loaded (libcuda.so.1: \
         cannot open shared object file: No such file or directory; libcuda.so: cannot open \
         shared object file: No such file or directory): install the NVIDIA driver (CUDA \
         11.4, R470, or newer), or on Debian without a GPU run cuda-brand's \
         scripts/install-libcuda (it installs libcuda1, whose cuInit reports no device), or \
         set CUDA_BRAND_DRIVER_LIBRARY to the library's path"
    );
}
