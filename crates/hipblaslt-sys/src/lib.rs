//! hipBLASLt, loaded at run time beside the HIP runtime of the same ROCm install (6.0 and newer).
//! Layered like cudarc: [`sys`] (structs, constants, function pointers, loading), [`result`]
//! (each call a `Result` naming the status), [`safe`] (owned handle, descriptors, layouts).

pub mod result;
pub mod safe;
pub mod sys;

pub use sys::*;
