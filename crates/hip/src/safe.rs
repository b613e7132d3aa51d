//! Owned HIP resources: hipRTC programs (compile for an architecture, take the code object),
//! device and pinned memory, streams with graph capture, events, modules and their kernels, and
//! graphs. Each holds the loaded runtime, so it can release itself when dropped.

use std::ffi::{CString, c_char, c_int, c_void};
use std::sync::Arc;

use crate::result::{self, HipError, static_text};
use hip_sys::Hip;
use hip_sys::sys::{
    HIPRTC_SUCCESS, HipEvent, HipFunction, HipGraph, HipGraphExec, HipModule, HipStream,
    HiprtcProgram, HiprtcResult,
};

/// A failed compilation, with hipRTC's log.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Call(#[from] HipError),
    #[error("hipRTC could not compile for {arch}:\n{log}")]
    Failed { arch: String, log: String },
    #[error("source or option contains a NUL byte")]
    Nul,
}

fn rtc_check(hip: &Hip, call: &'static str, code: HiprtcResult) -> Result<(), HipError> {
    if code == HIPRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: hiprtcGetErrorString returns a static C string (or null) for any code.
    let message = unsafe {
        static_text(
            (hip.rtc.hiprtc_get_error_string)(code),
            "unknown hipRTC error",
        )
    };
    Err(HipError {
        call,
        code,
        message,
    })
}

/// hipRTC's version as (major, minor).
pub fn rtc_version(hip: &Hip) -> Result<(i32, i32), HipError> {
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: writes two ints.
    rtc_check(hip, "hiprtcVersion", unsafe {
        (hip.rtc.hiprtc_version)(&mut major, &mut minor)
    })?;
    Ok((major, minor))
}

/// A hipRTC program, destroyed when dropped.
struct Program<'a> {
    hip: &'a Hip,
    handle: HiprtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from hiprtcCreateProgram and is destroyed once.
        unsafe { (self.hip.rtc.hiprtc_destroy_program)(&mut self.handle) };
    }
}

impl Program<'_> {
    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: writes one size_t.
        if unsafe { (self.hip.rtc.hiprtc_get_program_log_size)(self.handle, &mut size) }
            != HIPRTC_SUCCESS
            || size == 0
        {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: the buffer holds `size` bytes, as hipRTC asked for.
        unsafe {
            (self.hip.rtc.hiprtc_get_program_log)(self.handle, buf.as_mut_ptr().cast::<c_char>())
        };
        String::from_utf8_lossy(&buf)
            .trim_end_matches('\0')
            .to_owned()
    }
}

/// Compiles `source` for `--offload-arch=arch` (always explicit: without it hipRTC asks the GPU)
/// with extra `options`, returning the ELF code object.
pub fn compile(
    hip: &Hip,
    source: &str,
    name: &str,
    arch: &str,
    options: &[&str],
) -> Result<Vec<u8>, CompileError> {
    let src = CString::new(source).map_err(|_| CompileError::Nul)?;
    let name_c = CString::new(name).map_err(|_| CompileError::Nul)?;
    let mut handle: HiprtcProgram = std::ptr::null_mut();
    // SAFETY: valid C strings; no headers.
    rtc_check(hip, "hiprtcCreateProgram", unsafe {
        (hip.rtc.hiprtc_create_program)(
            &mut handle,
            src.as_ptr(),
            name_c.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    let program = Program { hip, handle };
    let all: Vec<CString> = std::iter::once(format!("--offload-arch={arch}"))
        .chain(options.iter().map(|o| (*o).to_owned()))
        .map(|o| CString::new(o).map_err(|_| CompileError::Nul))
        .collect::<Result<_, _>>()?;
    let pointers: Vec<*const c_char> = all.iter().map(|o| o.as_ptr()).collect();
    // SAFETY: `pointers` holds valid C strings that outlive the call.
    let code = unsafe {
        (hip.rtc.hiprtc_compile_program)(program.handle, pointers.len() as c_int, pointers.as_ptr())
    };
    if code != HIPRTC_SUCCESS {
        let log = program.log();
        return Err(CompileError::Failed {
            arch: arch.to_owned(),
            log: if log.is_empty() {
                format!("hipRTC error {code}")
            } else {
                log
            },
        });
    }
    let mut size = 0usize;
    // SAFETY: writes one size_t.
    rtc_check(hip, "hiprtcGetCodeSize", unsafe {
        (hip.rtc.hiprtc_get_code_size)(program.handle, &mut size)
    })?;
    let mut code_object = vec![0u8; size];
    // SAFETY: the buffer holds `size` bytes.
    rtc_check(hip, "hiprtcGetCode", unsafe {
        (hip.rtc.hiprtc_get_code)(program.handle, code_object.as_mut_ptr().cast::<c_char>())
    })?;
    Ok(code_object)
}

/// Device memory on the device that was current when it was allocated, freed when dropped.
pub struct DeviceMemory {
    hip: Arc<Hip>,
    ptr: *mut c_void,
    bytes: usize,
}

// SAFETY: a device address is usable from any thread; HIP's allocator is thread-safe.
unsafe impl Send for DeviceMemory {}
// SAFETY: as above; `&DeviceMemory` only reads the address.
unsafe impl Sync for DeviceMemory {}

impl DeviceMemory {
    /// Allocates `bytes` (at least one) on the current device, uninitialised.
    pub fn alloc(hip: &Arc<Hip>, bytes: usize) -> Result<Self, HipError> {
        let ptr = result::malloc(hip, bytes.max(1))?;
        Ok(Self {
            hip: hip.clone(),
            ptr,
            bytes,
        })
    }

    pub fn address(&self) -> u64 {
        self.ptr as u64
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by hipMalloc in `alloc`, freed once.
        let _ = unsafe { result::free(&self.hip, self.ptr) };
    }
}

/// Pinned (page-locked) host memory, which copies reach at full bus speed.
pub struct PinnedMemory {
    hip: Arc<Hip>,
    ptr: *mut c_void,
    bytes: usize,
}

// SAFETY: plain host memory owned by this value; access goes through `&`/`&mut self`.
unsafe impl Send for PinnedMemory {}
// SAFETY: as above.
unsafe impl Sync for PinnedMemory {}

impl PinnedMemory {
    pub fn alloc(hip: &Arc<Hip>, bytes: usize) -> Result<Self, HipError> {
        let ptr = result::host_malloc(hip, bytes.max(1))?;
        Ok(Self {
            hip: hip.clone(),
            ptr,
            bytes,
        })
    }

    pub fn len(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The memory as bytes. Callers wait for copies that use it before reading or writing.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `bytes` bytes allocated in `alloc`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u8>(), self.bytes) }
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by hipHostMalloc in `alloc`, freed once.
        let _ = unsafe { result::host_free(&self.hip, self.ptr) };
    }
}

/// A non-blocking stream, destroyed when dropped.
pub struct Stream {
    hip: Arc<Hip>,
    handle: HipStream,
}

// SAFETY: HIP streams may be used from any thread; lc0rs orders its calls with a lock.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// A stream on the current device.
    pub fn new(hip: &Arc<Hip>) -> Result<Self, HipError> {
        Ok(Self {
            hip: hip.clone(),
            handle: result::stream_create(hip)?,
        })
    }

    pub fn handle(&self) -> HipStream {
        self.handle
    }

    pub fn synchronize(&self) -> Result<(), HipError> {
        // SAFETY: a live stream owned by `self`.
        unsafe { result::stream_synchronize(&self.hip, self.handle) }
    }

    pub fn is_capturing(&self) -> Result<bool, HipError> {
        // SAFETY: a live stream owned by `self`.
        unsafe { result::stream_is_capturing(&self.hip, self.handle) }
    }

    /// Starts recording this thread's work on the stream into a graph.
    pub fn begin_capture(&self) -> Result<(), HipError> {
        // SAFETY: a live stream owned by `self`.
        unsafe { result::stream_begin_capture(&self.hip, self.handle) }
    }

    /// Ends the capture and makes the graph ready to launch on this stream; `None` where
    /// nothing was captured.
    pub fn end_capture(&self) -> Result<Option<Graph>, HipError> {
        // SAFETY: a live stream owned by `self`.
        let graph = unsafe { result::stream_end_capture(&self.hip, self.handle) }?;
        if graph.is_null() {
            return Ok(None);
        }
        // SAFETY: a graph just captured; destroyed below on failure or by `Graph`'s drop.
        let exec = match unsafe { result::graph_instantiate(&self.hip, graph) } {
            Ok(exec) => exec,
            Err(e) => {
                // SAFETY: the graph is not used afterwards.
                let _ = unsafe { result::graph_destroy(&self.hip, graph) };
                return Err(e);
            }
        };
        // Not uploaded here: a graph uploads on its first launch (on CUDA, a graph uploaded and
        // never launched slowed every other graph launch of the process).
        Ok(Some(Graph {
            hip: self.hip.clone(),
            graph,
            exec,
        }))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, after its work (destroy waits for it).
        let _ = unsafe { result::stream_destroy(&self.hip, self.handle) };
    }
}

/// A timing event, destroyed when dropped.
pub struct Event {
    hip: Arc<Hip>,
    handle: HipEvent,
}

// SAFETY: HIP events may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    pub fn new(hip: &Arc<Hip>) -> Result<Self, HipError> {
        Ok(Self {
            hip: hip.clone(),
            handle: result::event_create(hip)?,
        })
    }

    /// Records the event on `stream` (inside a capture: an event-record node of the graph).
    pub fn record(&self, stream: &Stream) -> Result<(), HipError> {
        // SAFETY: both handles are live (owned by `self` and `stream`).
        unsafe { result::event_record(&self.hip, self.handle, stream.handle) }
    }

    /// Waits until the work enqueued before the record has completed.
    pub fn synchronize(&self) -> Result<(), HipError> {
        // SAFETY: the event is live (owned by `self`).
        unsafe { result::event_synchronize(&self.hip, self.handle) }
    }

    /// Milliseconds from `self` to `end`, waiting for `end`.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, HipError> {
        // SAFETY: both events are live.
        unsafe { result::event_elapsed_ms(&self.hip, self.handle, end.handle) }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::event_destroy(&self.hip, self.handle) };
    }
}

/// A loaded code object, unloaded when dropped; its functions live as long as it does.
pub struct Module {
    hip: Arc<Hip>,
    handle: HipModule,
}

// SAFETY: modules and their functions may be used from any thread.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl Module {
    /// Loads a code object on the current device.
    pub fn load(hip: &Arc<Hip>, image: &[u8]) -> Result<Self, HipError> {
        Ok(Self {
            hip: hip.clone(),
            handle: result::module_load_data(hip, image)?,
        })
    }

    /// The kernel `name` (an `extern "C"` name) of this module.
    pub fn function(&self, name: &str) -> Result<Function, HipError> {
        let c_name = CString::new(name).map_err(|_| HipError {
            call: "hipModuleGetFunction",
            code: 0,
            message: format!("kernel name {name:?} contains a NUL byte"),
        })?;
        // SAFETY: a live module owned by `self`.
        let handle = unsafe { result::module_get_function(&self.hip, self.handle, &c_name) }?;
        Ok(Function(handle))
    }

    /// Launches `function` (one of this module's, so alive while `self` is) on `stream`;
    /// `params` holds one pointer to each argument's value.
    ///
    /// # Safety
    /// The arguments match the kernel's parameters in number, order and type, and every device
    /// pointer among them is valid for what the kernel touches.
    pub unsafe fn launch(
        &self,
        function: Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> Result<(), HipError> {
        // SAFETY: as the caller promises; the stream is live.
        unsafe {
            result::module_launch_kernel(
                &self.hip,
                function.0,
                grid,
                block,
                shared_bytes,
                stream.handle,
                params,
            )
        }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once.
        let _ = unsafe { result::module_unload(&self.hip, self.handle) };
    }
}

/// A kernel of a [`Module`], launched through it.
#[derive(Clone, Copy, Debug)]
pub struct Function(HipFunction);

// SAFETY: a function handle may be launched from any thread while its module lives.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

/// A captured graph ready to launch, destroyed (with its executable) when dropped.
pub struct Graph {
    hip: Arc<Hip>,
    graph: HipGraph,
    exec: HipGraphExec,
}

// SAFETY: graph executables may be launched from any thread.
unsafe impl Send for Graph {}

impl Graph {
    pub fn launch(&self, stream: &Stream) -> Result<(), HipError> {
        // SAFETY: live handles.
        unsafe { result::graph_launch(&self.hip, self.exec, stream.handle) }
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: created by `Stream::end_capture`, destroyed once.
        unsafe {
            let _ = result::graph_exec_destroy(&self.hip, self.exec);
            let _ = result::graph_destroy(&self.hip, self.graph);
        }
    }
}
