//! The raw hipBLASLt bindings, loaded at run time beside the HIP runtime of the same ROCm install
//! (6.0 and newer): structs, constants, function pointers and loading only. Checked calls and
//! owned descriptors are the `hipblaslt` crate.

pub mod sys;

pub use sys::*;
