//! Kernel timestamps from CUPTI's activity API: the GPU's own start and end time of every
//! kernel, memset and memcpy, with no events added to the work (events between ~200 small
//! kernels stretch a batch-64 pass by a fifth). The profiler uses them to time each operation of
//! a captured graph's replay.

use std::alloc::{Layout, alloc, dealloc};
use std::sync::{Mutex, OnceLock};

use cudarc::cupti::result::{CuptiError, activity};
use cudarc::cupti::sys::{self, CUpti_ActivityKind as Kind};
use cudarc::driver::sys::{CUcontext, CUstream};

use crate::gpu::{Activity, GpuError, GpuResult};

/// The size of each record buffer CUPTI asks for (as NVIDIA's samples use).
const BUFFER_BYTES: usize = 8 << 20;
const BUFFER_ALIGN: usize = 8;

/// The activity kinds traced: everything a captured pass puts on the GPU.
const KINDS: [Kind; 3] = [
    Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    Kind::CUPTI_ACTIVITY_KIND_MEMSET,
    Kind::CUPTI_ACTIVITY_KIND_MEMCPY,
];

// Every record version of these kinds has `start` and `end` (ns) at bytes 16 and 24.
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityKernel10, start) == 16);
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityKernel10, end) == 24);
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityMemset4, start) == 16);
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityMemset4, end) == 24);
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityMemcpy6, start) == 16);
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityMemcpy6, end) == 24);
// Kernel records keep the name pointer at the same place in every version lc0rs may receive
// (versions 11–13, of CUDA 13.1–13.4's CUPTI, declare the same fields before it).
const KERNEL_NAME_OFFSET: usize = std::mem::offset_of!(sys::CUpti_ActivityKernel10, name);
const _: () = assert!(std::mem::offset_of!(sys::CUpti_ActivityKernel9, name) == KERNEL_NAME_OFFSET);

// Where each kind's record keeps CUPTI's id of the stream the work ran on (the same in the
// kernel record versions lc0rs may receive).
const KERNEL_STREAM_OFFSET: usize = std::mem::offset_of!(sys::CUpti_ActivityKernel10, streamId);
const _: () =
    assert!(std::mem::offset_of!(sys::CUpti_ActivityKernel9, streamId) == KERNEL_STREAM_OFFSET);
const MEMSET_STREAM_OFFSET: usize = std::mem::offset_of!(sys::CUpti_ActivityMemset4, streamId);
const MEMCPY_STREAM_OFFSET: usize = std::mem::offset_of!(sys::CUpti_ActivityMemcpy6, streamId);

/// Records delivered by CUPTI's completion callback (which may run on CUPTI's own thread),
/// each with the id of its stream.
static RECORDS: Mutex<Vec<(u32, Activity)>> = Mutex::new(Vec::new());

fn buffer_layout() -> Layout {
    Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).expect("a valid layout")
}

extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    // SAFETY: CUPTI passes valid out-pointers; the buffer is freed in `buffer_completed`,
    // which CUPTI calls for every buffer it requested. A null buffer tells CUPTI to drop records.
    unsafe {
        *buffer = alloc(buffer_layout());
        *size = if (*buffer).is_null() { 0 } else { BUFFER_BYTES };
        *max_records = 0;
    }
}

extern "C" fn buffer_completed(
    _context: cudarc::driver::sys::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut out = RECORDS.lock().unwrap_or_else(|e| e.into_inner());
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: CUPTI filled `valid` bytes of the buffer with records; each record starts with
    // its kind, and the kinds read here keep start/end at bytes 16/24 (asserted above).
    unsafe {
        while activity::get_next_record(buffer, valid, &mut record).is_ok() {
            let kind = (*record).kind;
            if KINDS.contains(&kind) {
                let bytes = record.cast::<u8>();
                let stream_at = |offset| bytes.add(offset).cast::<u32>().read_unaligned();
                let (stream, name) = match kind {
                    Kind::CUPTI_ACTIVITY_KIND_MEMSET => {
                        (stream_at(MEMSET_STREAM_OFFSET), "memset".to_owned())
                    }
                    Kind::CUPTI_ACTIVITY_KIND_MEMCPY => {
                        (stream_at(MEMCPY_STREAM_OFFSET), "memcpy".to_owned())
                    }
                    _ => {
                        // CUPTI keeps kernel names for the life of the process.
                        let name = bytes
                            .add(KERNEL_NAME_OFFSET)
                            .cast::<*const std::ffi::c_char>()
                            .read_unaligned();
                        let name = if name.is_null() {
                            "kernel".to_owned()
                        } else {
                            std::ffi::CStr::from_ptr(name)
                                .to_string_lossy()
                                .into_owned()
                        };
                        (stream_at(KERNEL_STREAM_OFFSET), name)
                    }
                };
                let activity = Activity {
                    start_ns: bytes.add(16).cast::<u64>().read_unaligned(),
                    end_ns: bytes.add(24).cast::<u64>().read_unaligned(),
                    name,
                };
                out.push((stream, activity));
            }
        }
        dealloc(buffer, buffer_layout());
    }
}

fn cupti_error(call: &'static str) -> impl FnOnce(CuptiError) -> GpuError {
    crate::gpu::library_error("CUPTI", call)
}

/// Whether libcupti can be loaded: from the library path, or else from the CUDA toolkit, where
/// it is not on the default path (see [`preload_from_toolkit`]).
pub fn available() -> bool {
    static PRELOADED: OnceLock<()> = OnceLock::new();
    // SAFETY: only tries to load the library.
    let present = || unsafe { sys::is_culib_present() };
    PRELOADED.get_or_init(|| {
        if !present() {
            preload_from_toolkit();
        }
    });
    present()
}

/// The toolkit directories that hold libcupti: `$CUDA_HOME`, `$CUDA_PATH` or `/usr/local/cuda`,
/// each under `extras/CUPTI/lib64` (classic layout) or `targets/x86_64-linux/lib` (CUDA 13).
fn toolkit_cupti_files() -> Vec<std::path::PathBuf> {
    let roots = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(std::path::PathBuf::from)
        .chain([std::path::PathBuf::from("/usr/local/cuda")]);
    let mut files: Vec<_> = roots
        .flat_map(|root| {
            ["extras/CUPTI/lib64", "targets/x86_64-linux/lib", "lib64"].map(|d| root.join(d))
        })
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libcupti.so."))
        })
        .collect();
    files.sort();
    files
}

/// Loads libcupti from the toolkit and keeps it loaded, so that cudarc's load by soname
/// (`libcupti.so.13`) finds it without `LD_LIBRARY_PATH`.
fn preload_from_toolkit() {
    for path in toolkit_cupti_files() {
        // SAFETY: loading CUPTI runs its initialisers, which are sound to run.
        if let Ok(library) = unsafe { libloading::Library::new(&path) } {
            tracing::debug!(path = %path.display(), "loaded CUPTI from the CUDA toolkit");
            // Kept for the life of the process: cudarc resolves its symbols through it.
            std::mem::forget(library);
            return;
        }
    }
}

/// Registers the buffer callbacks once per process.
fn register() -> GpuResult<()> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
                .map_err(|e| format!("{e:?}"))
        })
        .clone()
        .map_err(|detail| GpuError::Call {
            call: "cuptiActivityRegisterCallbacks",
            detail,
        })
}

/// CUPTI's id of `stream` of `context`, as its records name it.
fn stream_id(context: CUcontext, stream: CUstream) -> GpuResult<u32> {
    let mut id = 0;
    // SAFETY: a live context and one of its streams; `id` is a valid out-pointer.
    unsafe { sys::cuptiGetStreamIdEx(context, stream, 0, &mut id) }
        .result()
        .map_err(cupti_error("cuptiGetStreamIdEx"))?;
    Ok(id)
}

/// Runs `work` with activity tracing on, waits for it with `wait`, and returns what ran on
/// `stream` (of `context`) meanwhile, in start order. Tracing is process-wide: what other
/// streams ran meanwhile (other lanes, other backends) is left out. One trace at a time per
/// process.
pub fn trace(
    (context, stream): (CUcontext, CUstream),
    work: &mut dyn FnMut() -> GpuResult<()>,
    wait: &dyn Fn() -> GpuResult<()>,
) -> GpuResult<Vec<Activity>> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    register()?;
    let traced_stream = stream_id(context, stream)?;
    RECORDS.lock().unwrap_or_else(|e| e.into_inner()).clear();
    for kind in KINDS {
        activity::enable(kind).map_err(cupti_error("cuptiActivityEnable"))?;
    }
    let ran = work().and_then(|()| wait());
    for kind in KINDS {
        let _ = activity::disable(kind);
    }
    // SAFETY: the two enums share their values (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED = 1).
    let forced = unsafe {
        std::mem::transmute::<sys::CUpti_ActivityFlag, u32>(
            sys::CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED,
        )
    };
    let flushed = activity::flush_all(forced);
    ran?;
    flushed.map_err(cupti_error("cuptiActivityFlushAll"))?;
    let mut records: Vec<Activity> =
        std::mem::take(&mut *RECORDS.lock().unwrap_or_else(|e| e.into_inner()))
            .into_iter()
            .filter_map(|(stream, activity)| (stream == traced_stream).then_some(activity))
            .collect();
    records.sort_unstable();
    Ok(records)
}
