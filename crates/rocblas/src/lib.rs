//! rocBLAS over the raw bindings of `rocblas-sys`, layered like cudarc: [`result`] (each call a
//! `Result` with rocBLAS' own status text), [`safe`] (an owned handle bound to a stream and a
//! workspace). The raw layer is re-exported.

pub mod result;
pub mod safe;

pub use rocblas_sys::*;
