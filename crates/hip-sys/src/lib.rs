//! The HIP runtime (libamdhip64) and hipRTC, loaded at run time with libloading, so that lc0rs
//! builds and tests on machines without ROCm. Layered like cudarc: [`sys`] holds the raw types
//! and function pointers, [`result`] turns every call into a `Result`, [`safe`] owns resources;
//! [`comgr`] lists the ISAs the code object manager hipRTC compiles through knows.
//! Facts (sonames, signatures, values): `docs/gpu-apis.md`.

pub mod comgr;
pub mod loader;
pub mod result;
pub mod safe;
pub mod sys;

pub use libloading::Library;
pub use loader::{Hip, LoadError, Platform, library_candidates, open_companion, symbol};
pub use result::HipError;
