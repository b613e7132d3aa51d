//! The ROCm libraries' errors as the vendor-neutral [`GpuError::Library`]: each names its call
//! and gives a status (and a message where the library has one), kept in the status text as the
//! library words it; the library's own error stays the source.

use ::hip::HipError;
use ::hip::comgr::ComgrError;
use ::hipblaslt::result::HipblasLtError;
use ::rocblas::result::RocblasError;

use crate::gpu::GpuError;

impl From<HipError> for GpuError {
    fn from(e: HipError) -> Self {
        // hipRTC's calls travel as HIP errors too; their names tell them apart.
        let library = if e.call.starts_with("hiprtc") {
            "hipRTC"
        } else {
            "HIP runtime"
        };
        GpuError::Library {
            library,
            call: e.call,
            status: format!("{} ({})", e.message, e.code),
            source: Box::new(e),
        }
    }
}

impl From<ComgrError> for GpuError {
    fn from(e: ComgrError) -> Self {
        GpuError::Library {
            library: "comgr",
            call: e.call,
            status: format!("amd_comgr_status_t {}", e.status),
            source: Box::new(e),
        }
    }
}

impl From<RocblasError> for GpuError {
    fn from(e: RocblasError) -> Self {
        GpuError::Library {
            library: "rocBLAS",
            call: e.call,
            status: format!("{} (rocblas_status {})", e.message, e.status),
            source: Box::new(e),
        }
    }
}

impl From<HipblasLtError> for GpuError {
    fn from(e: HipblasLtError) -> Self {
        GpuError::Library {
            library: "hipBLASLt",
            call: e.call,
            status: format!(
                "HIPBLAS_STATUS_{} ({})",
                ::hipblaslt::status_name(e.status),
                e.status
            ),
            source: Box::new(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn a_rocm_error_names_the_library_call_code_and_message() {
        let hip = HipError {
            call: "hipMalloc",
            code: 2,
            message: "out of memory".to_owned(),
        };
        let error = GpuError::from(hip.clone());
        assert_eq!(
            error.to_string(),
            format!("HIP runtime: {hip}"),
            "the library's own text, after the library"
        );
        let source = error.source().expect("the library's error is the source");
        assert_eq!(source.downcast_ref::<HipError>(), Some(&hip));
    }

    #[test]
    fn every_rocm_library_keeps_its_own_words() {
        let rtc = HipError {
            call: "hiprtcCompileProgram",
            code: 6,
            message: "HIPRTC_ERROR_COMPILATION".to_owned(),
        };
        let comgr = ComgrError {
            call: "amd_comgr_get_isa_count",
            status: 1,
        };
        let rocblas = RocblasError {
            call: "rocblas_hgemm",
            status: 3,
            message: "rocblas_status_invalid_pointer".to_owned(),
        };
        let lt = HipblasLtError {
            call: "hipblasLtMatmul",
            status: 3,
        };
        for (error, text) in [
            (GpuError::from(rtc.clone()), format!("hipRTC: {rtc}")),
            (GpuError::from(comgr.clone()), format!("comgr: {comgr}")),
            (
                GpuError::from(rocblas.clone()),
                format!("rocBLAS: {rocblas}"),
            ),
            (GpuError::from(lt.clone()), format!("hipBLASLt: {lt}")),
        ] {
            assert_eq!(error.to_string(), text);
        }
    }
}
