//! Checked calls and owned resources over the raw HIP runtime and hipRTC bindings of `hip-sys`,
//! layered like cudarc: [`result`] turns every call into a `Result`, [`safe`] owns resources.
//! The raw layer and the loader are re-exported, so users name one crate.

pub mod result;
pub mod safe;

pub use hip_sys::{
    Hip, Library, LoadError, Platform, comgr, library_candidates, loader, open_companion, symbol,
    sys,
};
pub use result::HipError;
