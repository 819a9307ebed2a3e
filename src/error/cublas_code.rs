//! The names and descriptions of cuBLAS's status codes (`cublasStatus_t`, cublas_api.h of
//! cuBLAS 12 and 13), for [`ErrorCode::Cublas`](super::ErrorCode::Cublas) (feature
//! `cublas`). They live with the errors so that `error` names nothing of the layers above
//! it.

#![forbid(unsafe_code)]

/// The header's name of a `cublasStatus_t`.
pub(super) const fn name(raw: u32) -> &'static str {
    match raw {
        0 => "CUBLAS_STATUS_SUCCESS",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED",
        3 => "CUBLAS_STATUS_ALLOC_FAILED",
        7 => "CUBLAS_STATUS_INVALID_VALUE",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH",
        11 => "CUBLAS_STATUS_MAPPING_ERROR",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED",
        16 => "CUBLAS_STATUS_LICENSE_ERROR",
        _ => "CUBLAS_STATUS_UNRECOGNIZED",
    }
}

/// What a `cublasStatus_t` means, in words (cuBLAS's documentation, shortened).
pub(super) const fn description(raw: u32) -> &'static str {
    match raw {
        0 => "the operation completed successfully",
        1 => "the cuBLAS library was not initialized",
        3 => "resource allocation failed inside the cuBLAS library",
        7 => "an unsupported value or parameter was passed to the function",
        8 => "the function requires a feature absent from the device architecture",
        11 => "an access to GPU memory space failed",
        13 => "the GPU program failed to execute",
        14 => "an internal cuBLAS operation failed",
        15 => "the functionality requested is not supported",
        16 => "the functionality requested requires a license",
        _ => "a result code this version of cuda-brand does not know",
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Error, ErrorCode};

    #[test]
    fn cublas_statuses_read_as_the_header_names_them() {
        let e = Error::new("cublasGemmEx", ErrorCode::Cublas(7));
        assert_eq!(
            e.to_string(),
            "cublasGemmEx failed: CUBLAS_STATUS_INVALID_VALUE (an unsupported value or \
             parameter was passed to the function)"
        );
        assert_eq!(ErrorCode::Cublas(15).name(), "CUBLAS_STATUS_NOT_SUPPORTED");
        assert_eq!(ErrorCode::Cublas(15).raw(), None);
        assert_eq!(
            ErrorCode::Cublas(99).to_string(),
            "CUBLAS_STATUS_UNRECOGNIZED 99 (a result code this version of cuda-brand does not know)"
        );
        assert_eq!(
            ErrorCode::CublasNotFound.name(),
            "CUDA_BRAND_CUBLAS_NOT_FOUND"
        );
    }
}
