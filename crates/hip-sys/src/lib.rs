//! The raw HIP runtime (libamdhip64) and hipRTC bindings, loaded at run time with libloading, so
//! that lc0rs builds and tests on machines without ROCm. As in cudarc's `sys` layer this crate
//! holds only declarations and loading: [`sys`] the raw types and function pointers, [`loader`]
//! finding and opening the libraries, [`comgr`] the ISAs the code object manager hipRTC compiles
//! through knows. Checked calls and owned resources are the `hip` crate.
//! Facts (sonames, signatures, values): `docs/gpu-apis.md`.

pub mod comgr;
pub mod loader;
pub mod sys;

pub use libloading::Library;
pub use loader::{Hip, LoadError, Platform, library_candidates, open_companion, symbol};
