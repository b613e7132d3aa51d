//! The vendor-neutral GPU layer the encoder executor is written against: device buffers as raw
//! device addresses with RAII owners, one stream per device, host↔device copies, kernels from
//! `hip/` compiled at run time and launched by name, GEMMs through the classic BLAS or the Lt
//! library (with bias/activation epilogues, descriptors and algorithm cached per shape), events
//! for timing, and graph capture and replay. `cuda` implements it with cudarc, `hip` with
//! lc0rs' own ROCm bindings, and `emu` on the CPU (an emulated AMD GPU for correctness checks).
//!
//! # The device-memory contract
//!
//! Rust cannot see what a kernel, a copy, a fill or a GEMM reads and writes on the device, so
//! every call that takes a raw [`DevicePtr`] is `unsafe` (as cudarc's kernel launch is), and
//! each of them, the [`GpuDevice`] methods and the typed launchers of
//! [`kernels::launchers`] alike, requires of its caller this one contract:
//!
//! 1. Every `DevicePtr` the call receives points into an allocation of this device (made by
//!    it or by another lane of it) that stays allocated until the work is done: until the
//!    stream has run it, or, for work recorded into a graph, for as long as that graph exists
//!    and may be launched.
//! 2. That allocation holds every element the call reads or writes for the sizes it is passed
//!    (rows, columns, leading dimensions, strides, batch, the launch's grid), from the pointer
//!    on.
//! 3. No two pieces of work that may run at the same time race on the same bytes (one writes
//!    what the other reads or writes), unless the stream orders them; this holds until the
//!    work is done (recorded in a graph: whenever the graph may run), for every access,
//!    through a raw pointer or a [`GpuBuffer`] method alike.
//!
//! A [`GpuGraph`] replays the addresses recorded in it, whose validity the calls recorded
//! promised for the graph's whole life (point 1), so launching one stays safe: an owner of
//! graphs drops them before the buffers they use (the executor's lanes and backend do).
//! [`GpuBuffer`]'s copies check their range against the buffer and borrow it (mutably for a
//! write), so that plain copies need no `unsafe`.

pub mod attention_bench;
pub mod cuda;
pub mod emu;
pub mod events;
pub mod gemm;
pub mod hip;
pub mod kernels;
pub mod lt_plan;
mod memory;
pub mod staging;

pub use memory::{DevicePtr, GpuBuffer, MemorySpace};

/// Why a GPU operation failed. Messages name the call.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("{library} is not available: {detail}")]
    LibraryMissing {
        library: &'static str,
        detail: String,
    },
    #[error("no GPU: {0}")]
    NoDevice(String),
    /// A graph capture that work outside it invalidated (a call of another thread that
    /// synchronises the whole device, for one). Nothing captured ran, so capturing again is
    /// safe.
    #[error("{call}: the capture was invalidated by work outside it")]
    CaptureInvalidated { call: &'static str },
    /// A call that failed for a reason of ours, told in words.
    #[error("{call} failed: {detail}")]
    Call { call: &'static str, detail: String },
    /// A vendor library's call that failed, whichever the vendor: the library, the call and
    /// the library's status in its own words (its code and message where it gives both). The
    /// library's own error is kept as the source, for a caller that knows the vendor.
    #[error("{library}: {call} failed: {status}")]
    Library {
        library: &'static str,
        call: &'static str,
        status: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file step of `call` (on `path`) that failed; the I/O error is kept as the source.
    #[error("{call}: {path}: {source}")]
    Io {
        call: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("compiling kernels for {arch} failed:\n{log}")]
    Compile { arch: String, log: String },
    #[error("unknown kernel {0:?}")]
    UnknownKernel(String),
    #[error("{0}")]
    Unsupported(String),
}

pub type GpuResult<T> = Result<T, GpuError>;

/// `map_err` for a call of `library` whose error tells the status in its `Display` (cudarc's
/// do): the error becomes the source of [`GpuError::Library`] naming the library and `call`.
pub fn library_error<E>(library: &'static str, call: &'static str) -> impl FnOnce(E) -> GpuError
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |e| GpuError::Library {
        library,
        call,
        status: e.to_string(),
        source: Box::new(e),
    }
}

/// A kernel argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KernelArg {
    /// A device pointer, or null.
    Ptr(Option<DevicePtr>),
    I32(i32),
    I64(i64),
    F32(f32),
}

impl KernelArg {
    /// The value in an 8-byte argument slot, as HIP launches and the emulator's entry points
    /// take them: its little-endian bytes first (32-bit values zero-extended).
    pub fn slot(self) -> u64 {
        match self {
            KernelArg::Ptr(p) => p.map_or(0, DevicePtr::raw),
            KernelArg::I32(v) => u64::from(v as u32),
            KernelArg::I64(v) => v as u64,
            KernelArg::F32(v) => u64::from(v.to_bits()),
        }
    }
}

/// A launch configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl Launch {
    /// A 1-D grid-stride launch over `n` elements with 256 threads per block.
    pub fn elements(n: usize) -> Self {
        let blocks = n.div_ceil(256).clamp(1, 65_535 * 8) as u32;
        Self {
            grid: [blocks, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        }
    }
}

/// What a dense layer applies after `X·Wᵀ (+ bias)`: nothing, ReLU or SiLU. On the Lt path
/// these are library epilogues where the library has them (ReLU on both; bias+SiLU on hipBLASLt
/// from ROCm 7); otherwise, and on the BLAS path, the `bias_activation` kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Epilogue {
    None,
    Relu,
    Silu,
}

/// Which GEMM library runs the dense layers (`gemm=blas|lt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmPath {
    /// cuBLAS / rocBLAS `gemm_ex`; a bias is added by a kernel.
    Blas,
    /// cuBLASLt / hipBLASLt with the bias fused in the epilogue.
    Lt,
}

impl GemmPath {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "blas" => Some(Self::Blas),
            "lt" => Some(Self::Lt),
            _ => None,
        }
    }
}

/// A dense layer on fp16 row-major data: `Y[m][n] = X[m][k] · W[n][k]ᵀ (+ bias[n])`, with
/// leading dimensions (row strides, in elements) `ldx ≥ k` and `ldy ≥ n`, then `epilogue`.
/// fp32 accumulation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub x: DevicePtr,
    pub ldx: usize,
    pub w: DevicePtr,
    pub y: DevicePtr,
    pub ldy: usize,
    pub bias: Option<DevicePtr>,
    pub epilogue: Epilogue,
}

/// Per-batch products on fp16 row-major data: for each `i < batch`,
/// `C_i[m][n] = alpha · A_i[m][k] · B_i[n][k]ᵀ`, or with `b_transposed` (B stored as `[k][n]`)
/// `alpha · A_i · B_i`; A and B with row strides `lda`/`ldb` and batch strides in elements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchedProduct {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a: DevicePtr,
    pub lda: usize,
    pub stride_a: usize,
    pub b: DevicePtr,
    pub ldb: usize,
    pub stride_b: usize,
    pub b_transposed: bool,
    pub c: DevicePtr,
    pub ldc: usize,
    pub stride_c: usize,
}

/// What `lc0rs devices` and the backends report about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub arch: String,
    pub memory_bytes: usize,
    pub multiprocessors: u32,
    /// Threads per warp (32) or wavefront (32 on RDNA, 64 on CDNA).
    pub warp_size: u32,
    pub runtime: String,
}

/// One piece of work the GPU ran (a kernel, fill or copy), by the GPU's own clock.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Activity {
    pub start_ns: u64,
    pub end_ns: u64,
    /// The kernel's name, or `memset` / `memcpy`.
    pub name: String,
}

/// A recorded sequence of GPU work that can be replayed.
///
/// Launching is safe: every call recorded into the graph was an `unsafe` call whose caller
/// promised that its memory stays allocated, and unraced, for as long as the graph may be
/// launched (the [device-memory contract](self#the-device-memory-contract)). Whoever captures
/// a graph therefore drops it before the buffers it uses.
pub trait GpuGraph: Send {
    fn launch(&self) -> GpuResult<()>;
}

/// A GPU with one stream on which every call is ordered.
pub trait GpuDevice: Send + Sync {
    fn info(&self) -> &DeviceInfo;
    /// The memory this device's buffers live in, the same for every lane of one GPU.
    fn memory_space(&self) -> MemorySpace;
    /// Allocates `bytes` (uninitialised).
    fn alloc(&self, bytes: usize) -> GpuResult<GpuBuffer>;
    /// Copies `bytes` host bytes to `dst` (stream-ordered), written by `fill` straight into
    /// the (pinned) staging memory the copy reads from, so that large inputs are not first
    /// built elsewhere and copied.
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `bytes` at `dst`
    /// ([`GpuBuffer::copy_from_host_with`] is the checked form).
    unsafe fn upload_with(
        &self,
        dst: DevicePtr,
        bytes: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> GpuResult<()>;
    /// Copies `bytes` device bytes from `src` to the host, waiting for the stream, and hands
    /// them to `read` where they landed (pinned staging memory), so that large results are
    /// copied once, into their final place: in consecutive pieces, in order (a device may copy
    /// the next piece while `read` takes one), each a multiple of 4 bytes but maybe the last.
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `bytes` at `src`
    /// ([`GpuBuffer::copy_to_host_with`] is the checked form).
    unsafe fn download_with(
        &self,
        src: DevicePtr,
        bytes: usize,
        read: &mut dyn FnMut(&[u8]),
    ) -> GpuResult<()>;
    /// Copies host bytes to `dst` (stream-ordered; `src` is not needed after the call).
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `src.len()` bytes at
    /// `dst` ([`GpuBuffer::copy_from_host`] is the checked form).
    unsafe fn upload(&self, dst: DevicePtr, src: &[u8]) -> GpuResult<()> {
        // SAFETY: `src.len()` bytes at `dst`, the caller's promise.
        unsafe { self.upload_with(dst, src.len(), &mut |staged| staged.copy_from_slice(src)) }
    }
    /// Copies device bytes to the host, waiting for the stream.
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `dst.len()` bytes at
    /// `src` ([`GpuBuffer::copy_to_host`] is the checked form).
    unsafe fn download(&self, src: DevicePtr, dst: &mut [u8]) -> GpuResult<()> {
        let bytes = dst.len();
        let mut filled = 0;
        // SAFETY: `dst.len()` bytes at `src`, the caller's promise.
        unsafe {
            self.download_with(src, bytes, &mut |landed| {
                dst[filled..filled + landed.len()].copy_from_slice(landed);
                filled += landed.len();
            })
        }
    }
    /// Fills `bytes` at `dst` with the byte `value`.
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `bytes` at `dst`
    /// ([`GpuBuffer::fill`] is the checked form for a whole buffer).
    unsafe fn fill(&self, dst: DevicePtr, bytes: usize, value: u8) -> GpuResult<()>;
    /// Launches `kernel` with `args` (the typed launchers of [`kernels::launchers`] are the
    /// callers, so that the arguments match the kernel's parameters).
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for every pointer of
    /// `args`, with the sizes the kernel derives from the other arguments and `launch`; the
    /// arguments match the kernel's parameters in number and kind.
    unsafe fn launch(&self, kernel: &str, launch: Launch, args: &[KernelArg]) -> GpuResult<()>;
    /// Device memory (used, total) in bytes, for every process on the device.
    fn memory(&self) -> GpuResult<(usize, usize)>;
    /// Whether a kernel was compiled for this device (vendor-only fast paths).
    fn has_kernel(&self, kernel: &str) -> bool;
    /// Another lane on the same GPU: the same context, kernels and device memory (buffers of
    /// one lane may be used by another), with a stream, BLAS handles, workspaces, events and
    /// staging memory of its own, so that work on two lanes can run at the same time.
    fn new_lane(&self) -> GpuResult<std::sync::Arc<dyn GpuDevice>>;
    /// Whether the kernels launched from now on may start before the previous kernel of the
    /// stream has finished (programmatic dependent launch; every kernel waits for it in
    /// `PRIOR_KERNELS_DONE()`), where the device has it: a lane sets it per pass, as the pass's
    /// plan says.
    fn set_programmatic_launch(&self, _on: bool) {}
    /// Whether the device has programmatic dependent launch (NVIDIA sm_90 and newer), so that
    /// a pass's plan can say whether its kernels launch that way.
    fn has_programmatic_launch(&self) -> bool {
        false
    }
    /// Why `path` cannot run on this device (its library is missing), if it cannot.
    fn gemm_path_unavailable(&self, _path: GemmPath) -> Option<String> {
        None
    }
    /// Runs the dense layer `op` on `path`.
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `op`'s pointers: `x`
    /// holds `m` rows of `k` (row stride `ldx`), `w` `n × k`, `y` `m` rows of `n` (stride
    /// `ldy`), `bias` (if any) `n` values, all fp16.
    unsafe fn linear(&self, path: GemmPath, op: &Linear) -> GpuResult<()>;
    /// Runs the per-batch products `op`.
    ///
    /// # Safety
    /// The [device-memory contract](self#the-device-memory-contract) for `op`'s pointers with
    /// its sizes, leading dimensions and batch strides.
    unsafe fn batched_product(&self, op: &BatchedProduct) -> GpuResult<()>;
    fn synchronize(&self) -> GpuResult<()>;
    /// Starts recording the stream's work into a graph instead of running it.
    fn begin_capture(&self) -> GpuResult<()>;
    fn end_capture(&self) -> GpuResult<Box<dyn GpuGraph>>;
    /// Records a timing event on the stream; `elapsed_ms(a, b)` waits for both.
    fn record_event(&self) -> GpuResult<usize>;
    fn elapsed_ms(&self, start: usize, end: usize) -> GpuResult<f32>;
    /// Forgets the recorded events.
    fn clear_events(&self);
    /// Whether [`captured_work`](Self::captured_work) and [`trace`](Self::trace) work here:
    /// kernel timestamps for the profiler (CUPTI on NVIDIA).
    fn can_trace(&self) -> bool {
        false
    }
    /// How many pieces of work that [`trace`](Self::trace) reports (kernel, fill and copy
    /// nodes) the capture in progress holds; the profiler marks operations with it.
    fn captured_work(&self) -> GpuResult<usize> {
        Err(GpuError::Unsupported(
            "counting captured work on this device".to_owned(),
        ))
    }
    /// Runs `work` with the GPU's activity tracing on and returns every kernel, fill and copy
    /// it ran, in start order.
    fn trace(&self, _work: &mut dyn FnMut() -> GpuResult<()>) -> GpuResult<Vec<Activity>> {
        Err(GpuError::Unsupported(
            "activity tracing on this device".to_owned(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn a_failed_library_call_keeps_the_library_error_as_its_source() {
        let cause = std::io::Error::other("CUDA_ERROR_OUT_OF_MEMORY");
        let error = library_error("CUDA driver", "cuMemAlloc")(cause);
        assert_eq!(
            error.to_string(),
            "CUDA driver: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"
        );
        let source = error.source().expect("the library's error is the source");
        let source = source
            .downcast_ref::<std::io::Error>()
            .expect("of the library's own type");
        assert_eq!(source.to_string(), "CUDA_ERROR_OUT_OF_MEMORY");
    }
}
