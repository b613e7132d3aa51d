//! Kernel launches with programmatic dependent launch (NVIDIA sm_90 and newer): the kernel may
//! start while the previous kernel of the stream still runs, its blocks resident and waiting in
//! `PRIOR_KERNELS_DONE()` (hip/prelude.h: the first statement of every kernel, or the one after
//! its weight loads) until that kernel has finished. At small batches, where a pass is a chain
//! of short dependent kernels, this overlaps each launch, and the weight loads, with the kernel
//! before. cudarc's launch builder has no launch
//! attributes, so this calls `cuLaunchKernelEx` itself.

use std::ffi::c_void;

use cudarc::driver::sys::{
    CUlaunchAttribute, CUlaunchAttributeID, CUlaunchConfig, cuLaunchKernelEx,
};
use cudarc::driver::{CudaFunction, CudaStream};

use crate::gpu::{GpuResult, Launch, library_error};

/// Launches `function` on `stream` with `launch`'s shape, allowed to start before the previous
/// kernel of the stream has finished. `slots` holds each argument in an 8-byte slot.
pub(super) fn launch_programmatic(
    stream: &CudaStream,
    function: &CudaFunction,
    launch: Launch,
    slots: &mut [u64],
) -> GpuResult<()> {
    // SAFETY: a plain C struct (an id and a union of plain values) for which all zero bytes are
    // valid; the two fields the driver reads for this id are set below.
    let mut attribute: CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    let config = CUlaunchConfig {
        gridDimX: launch.grid[0],
        gridDimY: launch.grid[1],
        gridDimZ: launch.grid[2],
        blockDimX: launch.block[0],
        blockDimY: launch.block[1],
        blockDimZ: launch.block[2],
        sharedMemBytes: launch.shared_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut attribute,
        numAttrs: 1,
    };
    let mut params: Vec<*mut c_void> = slots
        .iter_mut()
        .map(|slot| (slot as *mut u64).cast::<c_void>())
        .collect();
    // SAFETY: `config` and `attribute` outlive the call; `params` points at one 8-byte slot per
    // kernel parameter, in the order of the kernel's signature (the typed launchers are the only
    // callers; a test checks them against the kernel sources), and the driver copies them at
    // the launch; the function belongs to the stream's context.
    unsafe {
        cuLaunchKernelEx(
            &config,
            function.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(library_error("CUDA driver", "cuLaunchKernelEx"))
}
