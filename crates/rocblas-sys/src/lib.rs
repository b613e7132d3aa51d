//! rocBLAS, loaded at run time beside the HIP runtime of the same ROCm install (never mixing
//! majors: rocBLAS links `libamdhip64.so.<major>`). Layered like cudarc: [`sys`] (types,
//! constants, function pointers, loading), [`result`] (each call a `Result` with rocBLAS' own
//! status text), [`safe`] (an owned handle bound to a stream and a workspace).

pub mod result;
pub mod safe;
pub mod sys;

pub use sys::*;
