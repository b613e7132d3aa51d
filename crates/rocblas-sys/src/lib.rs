//! The raw rocBLAS bindings, loaded at run time beside the HIP runtime of the same ROCm install
//! (never mixing majors: rocBLAS links `libamdhip64.so.<major>`): types, constants, function
//! pointers and loading only. Checked calls and the owned handle are the `rocblas` crate.

pub mod sys;

pub use sys::*;
