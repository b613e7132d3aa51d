//! hipBLASLt over the raw bindings of `hipblaslt-sys`, layered like cudarc: [`result`] (each call
//! a `Result` naming the status), [`safe`] (owned handle, descriptors, layouts). The raw layer is
//! re-exported.

pub mod result;
pub mod safe;

pub use hipblaslt_sys::*;
