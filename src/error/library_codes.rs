//! The result codes of cuFFT (`cufftResult`, feature `cufft`) and cuRAND (`curandStatus_t`,
//! feature `curand`): their names and descriptions, for [`ErrorCode::Cufft`] and
//! [`ErrorCode::Curand`](super::ErrorCode::Curand). They live with the errors so that
//! `error` names nothing of the layers above it.
//!
//! [`ErrorCode::Cufft`]: super::ErrorCode::Cufft

#![forbid(unsafe_code)]

/// The name of a `cufftResult` (cufft.h), e.g. `"CUFFT_INVALID_SIZE"`.
#[cfg(feature = "cufft")]
pub(crate) const fn cufft_name(raw: u32) -> &'static str {
    match raw {
        1 => "CUFFT_INVALID_PLAN",
        2 => "CUFFT_ALLOC_FAILED",
        3 => "CUFFT_INVALID_TYPE",
        4 => "CUFFT_INVALID_VALUE",
        5 => "CUFFT_INTERNAL_ERROR",
        6 => "CUFFT_EXEC_FAILED",
        7 => "CUFFT_SETUP_FAILED",
        8 => "CUFFT_INVALID_SIZE",
        9 => "CUFFT_UNALIGNED_DATA",
        10 => "CUFFT_INCOMPLETE_PARAMETER_LIST",
        11 => "CUFFT_INVALID_DEVICE",
        12 => "CUFFT_PARSE_ERROR",
        13 => "CUFFT_NO_WORKSPACE",
        14 => "CUFFT_NOT_IMPLEMENTED",
        15 => "CUFFT_LICENSE_ERROR",
        16 => "CUFFT_NOT_SUPPORTED",
        _ => "CUFFT_UNRECOGNIZED",
    }
}

/// What a `cufftResult` means, in cufft.h's words.
#[cfg(feature = "cufft")]
pub(crate) const fn cufft_description(raw: u32) -> &'static str {
    match raw {
        1 => "cuFFT was passed an invalid plan handle",
        2 => "cuFFT failed to allocate GPU or CPU memory",
        3 => "invalid type",
        4 => "an invalid pointer or parameter",
        5 => "driver or internal cuFFT library error",
        6 => "failed to execute an FFT on the GPU",
        7 => "the cuFFT library failed to initialize",
        8 => "an invalid transform size",
        9 => "unaligned data",
        10 => "missing parameters in call",
        11 => "execution of a plan was on a different GPU than plan creation",
        12 => "internal plan database error",
        13 => "no workspace has been provided prior to plan execution",
        14 => "functionality not implemented for the parameters given",
        15 => "license error",
        16 => "operation not supported for the parameters given",
        _ => "a result code this version of cuda-brand does not know",
    }
}

/// The name of a `curandStatus_t` (curand.h), e.g. `"CURAND_STATUS_LENGTH_NOT_MULTIPLE"`.
#[cfg(feature = "curand")]
pub(crate) const fn curand_name(raw: u32) -> &'static str {
    match raw {
        100 => "CURAND_STATUS_VERSION_MISMATCH",
        101 => "CURAND_STATUS_NOT_INITIALIZED",
        102 => "CURAND_STATUS_ALLOCATION_FAILED",
        103 => "CURAND_STATUS_TYPE_ERROR",
        104 => "CURAND_STATUS_OUT_OF_RANGE",
        105 => "CURAND_STATUS_LENGTH_NOT_MULTIPLE",
        106 => "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED",
        201 => "CURAND_STATUS_LAUNCH_FAILURE",
        202 => "CURAND_STATUS_PREEXISTING_FAILURE",
        203 => "CURAND_STATUS_INITIALIZATION_FAILED",
        204 => "CURAND_STATUS_ARCH_MISMATCH",
        999 => "CURAND_STATUS_INTERNAL_ERROR",
        _ => "CURAND_STATUS_UNRECOGNIZED",
    }
}

/// What a `curandStatus_t` means, in curand.h's words.
#[cfg(feature = "curand")]
pub(crate) const fn curand_description(raw: u32) -> &'static str {
    match raw {
        100 => "header file and linked library version do not match",
        101 => "generator not initialized",
        102 => "memory allocation failed",
        103 => "generator is wrong type",
        104 => "argument out of range",
        105 => "length requested is not a multiple of dimension",
        106 => "GPU does not have double precision required by MRG32k3a",
        201 => "kernel launch failure",
        202 => "preexisting failure on library entry",
        203 => "initialization of CUDA failed",
        204 => "architecture mismatch, GPU does not support requested feature",
        999 => "internal library error",
        _ => "a result code this version of cuda-brand does not know",
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Error, ErrorCode};

    #[cfg(feature = "cufft")]
    #[test]
    fn cufft_codes_read_like_cufft_h() {
        for raw in 1..=16 {
            let code = ErrorCode::Cufft(raw);
            assert!(code.name().starts_with("CUFFT_"), "{raw}");
            assert!(!code.name().ends_with("UNRECOGNIZED"), "{raw}");
            assert_eq!(code.raw(), None, "not a CUresult");
            assert!(!code.is_sticky());
        }
        let e = Error::new("cufftMakePlanMany64", ErrorCode::Cufft(8));
        assert_eq!(
            e.to_string(),
            "cufftMakePlanMany64 failed: CUFFT_INVALID_SIZE (an invalid transform size)"
        );
        assert_eq!(
            ErrorCode::Cufft(77).to_string(),
            "CUFFT_UNRECOGNIZED 77 (a result code this version of cuda-brand does not know)"
        );
        assert_eq!(
            ErrorCode::CufftNotFound.to_string(),
            "CUDA_BRAND_CUFFT_NOT_FOUND (cuFFT library not found)"
        );
    }

    #[cfg(feature = "curand")]
    #[test]
    fn curand_codes_read_like_curand_h() {
        for raw in [100, 101, 102, 103, 104, 105, 106, 201, 202, 203, 204, 999] {
            let code = ErrorCode::Curand(raw);
            assert!(code.name().starts_with("CURAND_STATUS_"), "{raw}");
            assert!(!code.name().ends_with("UNRECOGNIZED"), "{raw}");
            assert_eq!(code.raw(), None, "not a CUresult");
        }
        let e = Error::new("curandGenerateNormal", ErrorCode::Curand(105));
        assert_eq!(
            e.to_string(),
            "curandGenerateNormal failed: CURAND_STATUS_LENGTH_NOT_MULTIPLE (length requested is not a multiple of dimension)"
        );
        assert_eq!(
            ErrorCode::Curand(7).to_string(),
            "CURAND_STATUS_UNRECOGNIZED 7 (a result code this version of cuda-brand does not know)"
        );
        assert_eq!(
            ErrorCode::CurandNotFound.to_string(),
            "CUDA_BRAND_CURAND_NOT_FOUND (cuRAND library not found)"
        );
    }
}
