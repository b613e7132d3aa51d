//! lc0rs' C ABI: open a network on a backend, add positions (lc0's 112 input planes, or a FEN
//! with the moves played from it), compute, and read lc0's outputs (the 1858 policy logits,
//! W/D/L and Q, moves left).
//!
//! The C header `include/lc0rs.h` is generated from this file by cbindgen (`cbindgen.toml`);
//! `tests/header.rs` regenerates it and fails when the committed copy differs
//! (`LC0RS_BLESS_HEADER=1` rewrites it).
//!
//! Every entry point runs inside `catch_unwind`: no Rust panic crosses the boundary (a panic is
//! reported as `LC0RS_STATUS_PANIC`). Objects are named by integer handles from a registry, not
//! by pointers, so a freed, never-issued or wrong-kind handle is detected rather than
//! dereferenced.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, TryLockError};

use lc0rs::backend::{
    Backend, BackendError, BatchOutput, PickedOutput, PolicyPicks, best_backend_name,
    create_backend, evaluate_in_passes, evaluate_picked_in_passes,
};
use lc0rs::chess::castling::uci_notation;
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{ChessError, HistoryFill, InputPlanes, PositionHistory, encode_position};
use lc0rs::netsource::NetSource;
use lc0rs::weights::{LoadOptions, Model, WeightsError, load_model_bytes};

mod picked;

pub use picked::{
    Lc0rsInputPlane, lc0rs_computation_add_picked, lc0rs_computation_compute_planes,
    lc0rs_computation_get_picked_outputs,
};

/// The version of this interface: changes whenever a declaration in the header changes.
pub const LC0RS_ABI_VERSION: u32 = 5;
/// Policy logits per position (lc0's policy index, 0 ≤ index < 1858).
pub const LC0RS_POLICY_SIZE: usize = 1858;
/// Input planes per position.
pub const LC0RS_INPUT_PLANES: usize = 112;

/// What a call returned. Every failed call also leaves a message for `lc0rs_last_error`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lc0rsStatus {
    Ok = 0,
    /// A pointer argument that must not be NULL was NULL.
    NullPointer = 1,
    /// A handle that is 0, was never issued, was already freed, or names the other kind of
    /// object.
    InvalidHandle = 2,
    /// A position or policy index past the end, or an output buffer too small.
    OutOfRange = 3,
    /// Another thread is inside a call on the same computation; nothing was done.
    Busy = 4,
    /// A string that is not UTF-8, or another argument that cannot be used.
    InvalidArgument = 5,
    /// The weights could not be read or are not a valid network.
    Load = 6,
    /// The backend could not be made (unknown name or option) or failed to evaluate.
    Backend = 7,
    /// A FEN or a move was refused.
    Position = 8,
    /// The call does not fit the computation's state (outputs read before computing,
    /// positions added after computing, moves asked of a position added as planes).
    State = 9,
    /// A Rust panic was caught at the boundary: a bug in lc0rs.
    Panic = 10,
}

/// A network opened on a backend; 0 is never a valid handle.
pub type Lc0rsNet = u64;
/// A batch of positions being built, computed and read; 0 is never a valid handle.
pub type Lc0rsComputation = u64;

/// What a network on its backend takes and gives.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lc0rsNetInfo {
    /// lc0's input format id (`pblczero::NetworkFormat::InputFormat`: 1 classical,
    /// 2 castling plane, 3 canonical, 4 canonical with hectoplies, 5 the same with
    /// armageddon, 132 canonical v2, 133 canonical v2 armageddon): how planes passed to
    /// `lc0rs_computation_add_planes` must be encoded.
    pub input_format: i32,
    /// Whether the value head gives W/D/L (else D is 0 and Q the tanh value).
    pub has_wdl: bool,
    /// Whether the network has a moves-left head (else M is 0).
    pub has_moves_left: bool,
    /// The most positions the backend evaluates in one pass (a computation with more is
    /// evaluated in several passes).
    pub max_batch: usize,
    /// The batch size the backend runs best at.
    pub recommended_batch: usize,
}

/// Why a call failed; its `Display` is the message `lc0rs_last_error` returns.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{what} is a null pointer")]
    Null { what: &'static str },
    #[error(
        "{what} {handle:#x} is not a live handle (never issued, already freed, or another kind)"
    )]
    Handle { what: &'static str, handle: u64 },
    #[error("{what} {index} is out of range (0..{len})")]
    Range {
        what: &'static str,
        index: usize,
        len: usize,
    },
    #[error("{what}: {needed} needed, {given} given")]
    TooSmall {
        what: &'static str,
        needed: usize,
        given: usize,
    },
    #[error("{what}: {given} given, {expected} expected")]
    Mismatch {
        what: &'static str,
        given: usize,
        expected: usize,
    },
    #[error("the computation is in use by another thread")]
    Busy,
    #[error("{what} is not valid UTF-8")]
    Utf8 { what: &'static str },
    #[error("{what} is not aligned for its type")]
    Alignment { what: &'static str },
    #[error("{name}: {source}")]
    Load { name: String, source: WeightsError },
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Position(#[from] ChessError),
    #[error("{0}")]
    State(String),
}

impl Error {
    fn status(&self) -> Lc0rsStatus {
        match self {
            Error::Null { .. } => Lc0rsStatus::NullPointer,
            Error::Handle { .. } => Lc0rsStatus::InvalidHandle,
            Error::Range { .. } | Error::TooSmall { .. } | Error::Mismatch { .. } => {
                Lc0rsStatus::OutOfRange
            }
            Error::Busy => Lc0rsStatus::Busy,
            Error::Utf8 { .. } | Error::Alignment { .. } => Lc0rsStatus::InvalidArgument,
            Error::Load { .. } => Lc0rsStatus::Load,
            Error::Backend(_) => Lc0rsStatus::Backend,
            Error::Position(_) => Lc0rsStatus::Position,
            Error::State(_) => Lc0rsStatus::State,
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

// ---------------------------------------------------------------------------------------------
// Objects and their registry

struct Net {
    backend: Box<dyn Backend>,
}

/// A position's legal moves: lc0's notation, king-takes-rook notation, policy index.
type LegalMoves = Vec<(String, String, usize)>;

struct Computation {
    net: Arc<Net>,
    inputs: Vec<InputPlanes>,
    /// The legal moves of each position added as a FEN (`None`: added as planes).
    legal: Vec<Option<LegalMoves>>,
    /// The policy indices read of each position, where the positions were added with
    /// `lc0rs_computation_add_picked` (a computation holds one kind or the other).
    picks: Option<PolicyPicks>,
    output: Option<BatchOutput>,
    picked: Option<PickedOutput>,
}

impl Computation {
    fn output(&self) -> Result<&BatchOutput> {
        if self.picks.is_some() {
            return Err(Error::State(
                "the positions were added with lc0rs_computation_add_picked: read them with \
                 lc0rs_computation_get_picked_outputs"
                    .into(),
            ));
        }
        self.output.as_ref().ok_or_else(|| {
            Error::State("the computation has not been computed (lc0rs_computation_compute)".into())
        })
    }

    fn check_sample(&self, sample: usize) -> Result<()> {
        if sample < self.inputs.len() {
            Ok(())
        } else {
            Err(Error::Range {
                what: "sample",
                index: sample,
                len: self.inputs.len(),
            })
        }
    }

    fn accepts_inputs(&self) -> Result<()> {
        if self.output.is_some() || self.picked.is_some() {
            return Err(Error::State(
                "the computation was computed; lc0rs_computation_clear it before adding positions"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Positions added one by one (planes or FEN) cannot join positions added with picks.
    fn accepts_full_inputs(&self) -> Result<()> {
        if self.picks.is_some() {
            return Err(Error::State(
                "the computation holds positions added with lc0rs_computation_add_picked; \
                 a computation takes positions of one kind"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Handles are `tag << 48 | serial`: serials count up from 1 and are never reused, and the tag
/// tells a network's handle from a computation's.
const SERIAL_BITS: u32 = 48;
const NET_TAG: u64 = 0x4e54;
const COMPUTATION_TAG: u64 = 0x434d;

struct Registry {
    serial: AtomicU64,
    nets: Mutex<HashMap<u64, Arc<Net>>>,
    computations: Mutex<HashMap<u64, Arc<Mutex<Computation>>>>,
}

/// Held by [`lc0rs_net_prepare`] while it prepares.
static PREPARING: Mutex<()> = Mutex::new(());

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry {
    serial: AtomicU64::new(1),
    nets: Mutex::default(),
    computations: Mutex::default(),
});

/// Locks a registry map; a panic caught while one was held leaves it consistent (every
/// update is a single insert or remove), so a poisoned lock is taken as it is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn new_handle(tag: u64) -> u64 {
    let serial = REGISTRY.serial.fetch_add(1, Ordering::Relaxed);
    assert!(serial < 1 << SERIAL_BITS, "handle serials exhausted");
    tag << SERIAL_BITS | serial
}

fn net(handle: Lc0rsNet) -> Result<Arc<Net>> {
    lock(&REGISTRY.nets)
        .get(&handle)
        .cloned()
        .ok_or(Error::Handle {
            what: "network",
            handle,
        })
}

fn computation(handle: Lc0rsComputation) -> Result<Arc<Mutex<Computation>>> {
    lock(&REGISTRY.computations)
        .get(&handle)
        .cloned()
        .ok_or(Error::Handle {
            what: "computation",
            handle,
        })
}

/// Runs `f` on the computation, or fails with `Busy` at once if another thread is using it.
fn with_computation<T>(
    handle: Lc0rsComputation,
    f: impl FnOnce(&mut Computation) -> Result<T>,
) -> Result<T> {
    let shared = computation(handle)?;
    let mut guard = match shared.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::WouldBlock) => return Err(Error::Busy),
        // A panic inside an earlier call: every update below is completed before anything
        // that can fail, so the state is one the API can produce.
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
    };
    f(&mut guard)
}

// ---------------------------------------------------------------------------------------------
// The boundary: errors, panics and pointers

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    // An interior NUL cannot be represented; cut the message there.
    let message = match CString::new(message) {
        Ok(message) => message,
        Err(e) => {
            let end = e.nul_position();
            let mut bytes = e.into_vec();
            bytes.truncate(end);
            CString::new(bytes).unwrap_or_default()
        }
    };
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

/// Runs one entry point: its error becomes a status and the thread's last message, a panic
/// becomes `Panic` and never unwinds into C.
fn boundary(f: impl FnOnce() -> Result<()>) -> Lc0rsStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            set_last_error(String::new());
            Lc0rsStatus::Ok
        }
        Ok(Err(error)) => {
            set_last_error(error.to_string());
            error.status()
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            set_last_error(format!("internal error (a bug in lc0rs): {what}"));
            Lc0rsStatus::Panic
        }
    }
}

/// Reads an optional C string.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string valid for reads for the call.
unsafe fn optional_str<'a>(ptr: *const c_char, what: &'static str) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string readable for the call.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map(Some).map_err(|_| Error::Utf8 { what })
}

/// Reads a C string that must be given.
///
/// # Safety
/// As [`optional_str`].
unsafe fn required_str<'a>(ptr: *const c_char, what: &'static str) -> Result<&'a str> {
    // SAFETY: the caller's promise is passed on unchanged.
    unsafe { optional_str(ptr, what) }?.ok_or(Error::Null { what })
}

/// Writes `value` through an out pointer that must be given.
///
/// # Safety
/// `ptr` is NULL or valid and aligned for a write of one `T`.
unsafe fn write_out<T>(ptr: *mut T, value: T, what: &'static str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::Null { what });
    }
    // SAFETY: non-null, and the caller promises it is valid and aligned for one `T`.
    unsafe { ptr.write(value) };
    Ok(())
}

/// Borrows a C array of `len` elements that must be given.
///
/// # Safety
/// `ptr` is NULL or valid and aligned for reads of `len` elements for the call.
unsafe fn in_array<'a, T>(ptr: *const T, len: usize, what: &'static str) -> Result<&'a [T]> {
    if ptr.is_null() {
        return Err(Error::Null { what });
    }
    // SAFETY: non-null, and the caller promises `len` readable, aligned, initialised elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a C array of `len` elements to write, that must be given.
///
/// # Safety
/// `ptr` is NULL or valid and aligned for writes of `len` elements, not aliased, for the call.
unsafe fn out_array<'a, T>(ptr: *mut T, len: usize, what: &'static str) -> Result<&'a mut [T]> {
    if ptr.is_null() {
        return Err(Error::Null { what });
    }
    // SAFETY: non-null, and the caller promises `len` writable, aligned, unaliased elements
    // (`T` is `f32` or `c_char` here: every bit pattern already there is a valid value).
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

// ---------------------------------------------------------------------------------------------
// Entry points

/// The version of the interface this library implements (`LC0RS_ABI_VERSION` of its header).
///
/// Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_abi_version() -> u32 {
    LC0RS_ABI_VERSION
}

/// The library's version, a static NUL-terminated string.
///
/// Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last failed call on this thread ("" after a call that succeeded): a
/// NUL-terminated string owned by the library, valid until the next lc0rs call on this
/// thread. Never NULL.
///
/// Thread-safe: each thread has its own message.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// The name of a status code (`"LC0RS_STATUS_BUSY"`), a static NUL-terminated string;
/// `"LC0RS_STATUS_UNKNOWN"` for a value that is not one. Does not change `lc0rs_last_error`.
///
/// Thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_status_name(status: i32) -> *const c_char {
    let name: &'static str = match status {
        0 => "LC0RS_STATUS_OK\0",
        1 => "LC0RS_STATUS_NULL_POINTER\0",
        2 => "LC0RS_STATUS_INVALID_HANDLE\0",
        3 => "LC0RS_STATUS_OUT_OF_RANGE\0",
        4 => "LC0RS_STATUS_BUSY\0",
        5 => "LC0RS_STATUS_INVALID_ARGUMENT\0",
        6 => "LC0RS_STATUS_LOAD\0",
        7 => "LC0RS_STATUS_BACKEND\0",
        8 => "LC0RS_STATUS_POSITION\0",
        9 => "LC0RS_STATUS_STATE\0",
        10 => "LC0RS_STATUS_PANIC\0",
        _ => "LC0RS_STATUS_UNKNOWN\0",
    };
    name.as_ptr().cast()
}

/// Opens a network on a backend and stores its handle in `*out`.
///
/// `weights`: a weights file (`.pb.gz` or `.pb`), `bundled:tiny` / `bundled:tiny-dense` (the
/// nets built into the library), or `preset:NAME` (as the command line's `-w`); NULL is
/// `bundled:tiny`. `backend`: a backend name (`cpu`, `cuda-fp16`, `rocm-fp16`, `hip-emu`, ...);
/// NULL is the best one this machine runs. `options`: the backend's options as the command
/// line's `-o` (`threads=2,max_batch=64`); NULL is none. An unknown backend or option fails
/// with `LC0RS_STATUS_BACKEND` and a message naming what is available.
///
/// Thread-safe: any number of threads may open networks at once.
///
/// # Safety
/// Each string is NULL or NUL-terminated and readable; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_net_open(
    weights: *const c_char,
    backend: *const c_char,
    options: *const c_char,
    out: *mut Lc0rsNet,
) -> Lc0rsStatus {
    boundary(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        // SAFETY: the caller's promise for each string.
        let (weights, backend, options) = unsafe {
            (
                optional_str(weights, "weights")?,
                optional_str(backend, "backend")?,
                optional_str(options, "options")?,
            )
        };
        let source = NetSource::parse(weights).map_err(|source| Error::Load {
            name: weights.unwrap_or("bundled:tiny").to_owned(),
            source,
        })?;
        let name = source.display_name();
        let (model, _) = source
            .load(&LoadOptions::default(), &mut |_, _| {})
            .map_err(|source| Error::Load { name, source })?;
        let handle = register_net(model, backend, options)?;
        // SAFETY: checked non-null above; the caller promises it is valid for one write.
        unsafe { write_out(out, handle, "out") }
    })
}

/// Opens a network held in memory on a backend and stores its handle in `*out`.
///
/// `data`, `len`: the bytes of a weights file, gzip-compressed (`.pb.gz`) or plain protobuf
/// (`.pb`, e.g. an lc0 `pblczero::Net` serialized in memory); they are copied, and may be freed
/// once the call returns. `name`: what errors call the network (NULL is `"<memory>"`).
/// `backend` and `options`: as `lc0rs_net_open`. Bytes that are not a valid network (empty,
/// truncated or corrupt gzip, a malformed protobuf, an unsupported format) fail with
/// `LC0RS_STATUS_LOAD` and a message naming `name`.
///
/// Thread-safe: any number of threads may open networks at once.
///
/// # Safety
/// `data` is NULL or readable for `len` bytes; each string is NULL or NUL-terminated and
/// readable; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_net_open_bytes(
    data: *const u8,
    len: usize,
    name: *const c_char,
    backend: *const c_char,
    options: *const c_char,
    out: *mut Lc0rsNet,
) -> Lc0rsStatus {
    boundary(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        // SAFETY: the caller's promise for `data` and each string.
        let (bytes, name, backend, options) = unsafe {
            (
                in_array(data, len, "data")?,
                optional_str(name, "name")?,
                optional_str(backend, "backend")?,
                optional_str(options, "options")?,
            )
        };
        let name = name.unwrap_or("<memory>");
        let (model, _) =
            load_model_bytes(bytes.to_vec(), name, &LoadOptions::default()).map_err(|source| {
                Error::Load {
                    name: name.to_owned(),
                    source,
                }
            })?;
        let handle = register_net(model, backend, options)?;
        // SAFETY: checked non-null above; the caller promises it is valid for one write.
        unsafe { write_out(out, handle, "out") }
    })
}

/// Creates the backend for a loaded model and registers it; returns its handle.
fn register_net(model: Model, backend: Option<&str>, options: Option<&str>) -> Result<u64> {
    let name = match backend {
        Some(name) => name,
        None => best_backend_name(),
    };
    let backend = create_backend(name, model, options.unwrap_or(""))?;
    let handle = new_handle(NET_TAG);
    lock(&REGISTRY.nets).insert(handle, Arc::new(Net { backend }));
    Ok(handle)
}

/// Frees a network. Computations made from it keep working (each holds the network until it
/// is freed); the handle is invalid afterwards, and freeing it again returns
/// `LC0RS_STATUS_INVALID_HANDLE`.
///
/// Thread-safe; a call on the network in progress on another thread completes normally.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_net_free(net: Lc0rsNet) -> Lc0rsStatus {
    boundary(|| {
        lock(&REGISTRY.nets)
            .remove(&net)
            .map(drop)
            .ok_or(Error::Handle {
                what: "network",
                handle: net,
            })
    })
}

/// What the network takes and gives.
///
/// Thread-safe.
///
/// # Safety
/// `out` is NULL or valid for one write of an `lc0rs_net_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_net_get_info(net: Lc0rsNet, out: *mut Lc0rsNetInfo) -> Lc0rsStatus {
    boundary(|| {
        let net = self::net(net)?;
        let attributes = net.backend.attributes();
        let info = Lc0rsNetInfo {
            input_format: net.backend.input_format().lc0_id(),
            has_wdl: attributes.has_wdl,
            has_moves_left: attributes.has_mlh,
            max_batch: attributes.max_batch,
            recommended_batch: attributes.recommended_batch,
        };
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, info, "out") }
    })
}

/// Does the one-time work of each batch size (a GPU backend's graph capture and GEMM algorithm
/// choice) for computations of up to `max_batch` positions (at most the net's `max_batch`,
/// which a computation is evaluated in passes of) computed by up to `threads` threads at once,
/// so that no computation pays it; lc0rs' own engine does this before its first search.
/// Optional: without it, each size's first computation does the work. Both counts are at
/// least 1.
///
/// Thread-safe: calls from several threads are made one after another (two preparations at
/// once could each hold some of a GPU's lanes while waiting for the others'); computations
/// may run meanwhile.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_net_prepare(
    net: Lc0rsNet,
    max_batch: usize,
    threads: usize,
) -> Lc0rsStatus {
    boundary(|| {
        for (what, given) in [("max_batch", max_batch), ("threads", threads)] {
            if given == 0 {
                return Err(Error::TooSmall {
                    what,
                    needed: 1,
                    given,
                });
            }
        }
        let net = self::net(net)?;
        let largest = net.backend.attributes().max_batch.max(1);
        let _one_at_a_time = lock(&PREPARING);
        net.backend.prepare(max_batch.min(largest), threads)?;
        Ok(())
    })
}

/// Creates an empty computation on the network and stores its handle in `*out`.
///
/// Thread-safe: many threads may each create and use their own computations of one network at
/// once.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_create(
    net: Lc0rsNet,
    out: *mut Lc0rsComputation,
) -> Lc0rsStatus {
    boundary(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        let net = self::net(net)?;
        let handle = new_handle(COMPUTATION_TAG);
        let computation = Computation {
            net,
            inputs: Vec::new(),
            legal: Vec::new(),
            picks: None,
            output: None,
            picked: None,
        };
        lock(&REGISTRY.computations).insert(handle, Arc::new(Mutex::new(computation)));
        // SAFETY: checked non-null above; the caller promises it is valid for one write.
        unsafe { write_out(out, handle, "out") }
    })
}

/// Frees a computation; the handle is invalid afterwards, and freeing it again returns
/// `LC0RS_STATUS_INVALID_HANDLE`.
///
/// Computation calls (every `lc0rs_computation_*` function) are for one thread at a time per
/// computation: a call made while another thread is inside one on the same computation
/// returns `LC0RS_STATUS_BUSY` at once and does nothing (here: the computation stays alive).
/// Different computations may be used on different threads at once.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_computation_free(computation: Lc0rsComputation) -> Lc0rsStatus {
    boundary(|| {
        let mut map = lock(&REGISTRY.computations);
        let entry = map.get(&computation).ok_or(Error::Handle {
            what: "computation",
            handle: computation,
        })?;
        if matches!(entry.try_lock(), Err(TryLockError::WouldBlock)) {
            return Err(Error::Busy);
        }
        map.remove(&computation);
        Ok(())
    })
}

/// Adds a position given as lc0's 112 input planes: plane `p` is `values[p]` on the squares
/// whose bit is set in `masks[p]` (bit 0 = a1, bit 63 = h8) and 0 elsewhere, encoded in the
/// network's input format (`lc0rs_net_info.input_format`). Its policy is read by index only.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`; see
/// `lc0rs_computation_free`).
///
/// # Safety
/// `masks` and `values` are NULL or point to 112 readable elements each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_add_planes(
    computation: Lc0rsComputation,
    masks: *const u64,
    values: *const f32,
) -> Lc0rsStatus {
    boundary(|| {
        // SAFETY: the caller promises 112 readable elements behind each non-null pointer.
        let (masks, values) = unsafe {
            (
                in_array(masks, LC0RS_INPUT_PLANES, "masks")?,
                in_array(values, LC0RS_INPUT_PLANES, "values")?,
            )
        };
        with_computation(computation, |c| {
            c.accepts_inputs()?;
            c.accepts_full_inputs()?;
            c.inputs.push(picked::planes_of(masks, values));
            c.legal.push(None);
            Ok(())
        })
    })
}

/// Adds a position given as a FEN (as lc0 reads it; NULL is the start position) and the moves
/// played from it (`moves`: UCI moves separated by spaces, castling as e1g1 or e1h1; NULL or
/// "" for none). The last position is evaluated, with the ones before it as history (lc0's
/// `fen_only` history fill). A FEN or move that is refused fails with
/// `LC0RS_STATUS_POSITION` and adds nothing.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `fen` and `moves` are NULL or NUL-terminated and readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_add_fen(
    computation: Lc0rsComputation,
    fen: *const c_char,
    moves: *const c_char,
) -> Lc0rsStatus {
    boundary(|| {
        // SAFETY: the caller's promise for each string.
        let (fen, moves) = unsafe { (optional_str(fen, "fen")?, optional_str(moves, "moves")?) };
        with_computation(computation, |c| {
            c.accepts_inputs()?;
            c.accepts_full_inputs()?;
            let mut history = match fen {
                Some(fen) => PositionHistory::from_fen(fen)?,
                None => PositionHistory::startpos(),
            };
            for uci in moves.unwrap_or("").split_whitespace() {
                history.play_uci(uci)?;
            }
            let encoded =
                encode_position(&history, c.net.backend.input_format(), HistoryFill::FenOnly);
            let legal = entry_moves_with_indices(history.last(), encoded.transform)
                .into_iter()
                .map(|(m, index)| {
                    (
                        uci_notation(m, false).to_string(),
                        uci_notation(m, true).to_string(),
                        index,
                    )
                })
                .collect();
            c.inputs.push(encoded.planes);
            c.legal.push(Some(legal));
            Ok(())
        })
    })
}

/// The number of positions added, in `*out`.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_size(
    computation: Lc0rsComputation,
    out: *mut usize,
) -> Lc0rsStatus {
    boundary(|| {
        let size = with_computation(computation, |c| Ok(c.inputs.len()))?;
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, size, "out") }
    })
}

/// Evaluates every position added (in passes of at most the backend's `max_batch`). Blocks
/// until done. Afterwards the outputs can be read and no position can be added until
/// `lc0rs_computation_clear`; computing again recomputes the same positions.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`); computations of one
/// network may compute on several threads at once.
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_computation_compute(computation: Lc0rsComputation) -> Lc0rsStatus {
    boundary(|| {
        with_computation(computation, |c| {
            match &c.picks {
                Some(picks) => {
                    c.picked = Some(evaluate_picked_in_passes(
                        &*c.net.backend,
                        &c.inputs,
                        picks,
                    )?);
                }
                None => c.output = Some(evaluate_in_passes(&*c.net.backend, &c.inputs)?),
            }
            Ok(())
        })
    })
}

/// Removes every position and output, so that the computation can be filled again.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
#[unsafe(no_mangle)]
pub extern "C" fn lc0rs_computation_clear(computation: Lc0rsComputation) -> Lc0rsStatus {
    boundary(|| {
        with_computation(computation, |c| {
            c.inputs.clear();
            c.legal.clear();
            c.picks = None;
            c.output = None;
            c.picked = None;
            Ok(())
        })
    })
}

/// Reads one output of position `sample` after computing.
fn read_output<T>(
    computation: Lc0rsComputation,
    sample: usize,
    read: impl FnOnce(&BatchOutput) -> Result<T>,
) -> Result<T> {
    with_computation(computation, |c| {
        c.check_sample(sample)?;
        read(c.output()?)
    })
}

/// Q = W − L of position `sample` (for the side to move), in `*out`.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_q(
    computation: Lc0rsComputation,
    sample: usize,
    out: *mut f32,
) -> Lc0rsStatus {
    boundary(|| {
        let q = read_output(computation, sample, |o| Ok(o.q[sample]))?;
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, q, "out") }
    })
}

/// The draw probability D of position `sample` (0 without a WDL head), in `*out`.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_d(
    computation: Lc0rsComputation,
    sample: usize,
    out: *mut f32,
) -> Lc0rsStatus {
    boundary(|| {
        let d = read_output(computation, sample, |o| Ok(o.d[sample]))?;
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, d, "out") }
    })
}

/// The moves left M of position `sample` in plies (0 without a moves-left head), in `*out`.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_m(
    computation: Lc0rsComputation,
    sample: usize,
    out: *mut f32,
) -> Lc0rsStatus {
    boundary(|| {
        let m = read_output(computation, sample, |o| Ok(o.m[sample]))?;
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, m, "out") }
    })
}

/// Win, draw and loss probabilities of position `sample` for the side to move, in
/// `out[0..3]`.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for writes of 3 floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_wdl(
    computation: Lc0rsComputation,
    sample: usize,
    out: *mut f32,
) -> Lc0rsStatus {
    boundary(|| {
        let wdl = read_output(computation, sample, |o| Ok(o.wdl_of(sample)))?;
        // SAFETY: the caller promises 3 writable floats behind a non-null `out`.
        unsafe { out_array(out, 3, "out") }?.copy_from_slice(&wdl);
        Ok(())
    })
}

/// The raw policy logit of lc0's policy index `index` (0 ≤ index < 1858) for position
/// `sample`, in `*out`.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_policy_logit(
    computation: Lc0rsComputation,
    sample: usize,
    index: usize,
    out: *mut f32,
) -> Lc0rsStatus {
    boundary(|| {
        let logit = read_output(computation, sample, |o| {
            if index >= LC0RS_POLICY_SIZE {
                return Err(Error::Range {
                    what: "policy index",
                    index,
                    len: LC0RS_POLICY_SIZE,
                });
            }
            Ok(o.policy_of(sample)[index])
        })?;
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, logit, "out") }
    })
}

/// All 1858 raw policy logits of position `sample`, in `out[0..1858]`; `len` is the room in
/// `out` (less than 1858: `LC0RS_STATUS_OUT_OF_RANGE`, nothing written).
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `out` is NULL or valid for writes of `len` floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_policy_logits(
    computation: Lc0rsComputation,
    sample: usize,
    out: *mut f32,
    len: usize,
) -> Lc0rsStatus {
    boundary(|| {
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        if len < LC0RS_POLICY_SIZE {
            return Err(Error::TooSmall {
                what: "policy buffer",
                needed: LC0RS_POLICY_SIZE,
                given: len,
            });
        }
        read_output(computation, sample, |o| {
            // SAFETY: non-null; the caller promises `len` ≥ 1858 writable floats.
            let out = unsafe { out_array(out, LC0RS_POLICY_SIZE, "out") }?;
            out.copy_from_slice(o.policy_of(sample));
            Ok(())
        })
    })
}

/// The legal moves of position `sample` (added as a FEN) as a NUL-terminated string of UCI
/// moves separated by spaces (castling as e1g1; Chess960 castling as king takes rook), in
/// lc0's policy-index order. `*needed` receives the bytes needed, NUL included; when `len` is
/// smaller, nothing is written to `buffer` (which may then be NULL) and the call returns
/// `LC0RS_STATUS_OUT_OF_RANGE`. Needs no compute.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `buffer` is NULL or valid for writes of `len` bytes; `needed` is NULL or valid for one
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_legal_moves(
    computation: Lc0rsComputation,
    sample: usize,
    buffer: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> Lc0rsStatus {
    boundary(|| {
        if needed.is_null() {
            return Err(Error::Null { what: "needed" });
        }
        let text = with_computation(computation, |c| {
            c.check_sample(sample)?;
            let legal = fen_moves(c, sample)?;
            let mut sorted: Vec<_> = legal.iter().collect();
            sorted.sort_by_key(|(_, _, index)| *index);
            let names: Vec<&str> = sorted.iter().map(|(name, _, _)| name.as_str()).collect();
            Ok(names.join(" "))
        })?;
        // SAFETY: the caller's promise for `needed`.
        unsafe { write_out(needed, text.len() + 1, "needed") }?;
        if len < text.len() + 1 {
            return Err(Error::TooSmall {
                what: "move buffer",
                needed: text.len() + 1,
                given: len,
            });
        }
        // SAFETY: the caller promises `len` writable bytes behind a non-null `buffer`.
        let out = unsafe { out_array(buffer, len, "buffer") }?;
        for (dst, &src) in out.iter_mut().zip(text.as_bytes().iter().chain(&[0])) {
            *dst = src as c_char;
        }
        Ok(())
    })
}

fn fen_moves(c: &Computation, sample: usize) -> Result<&LegalMoves> {
    c.legal[sample].as_ref().ok_or_else(|| {
        Error::State(format!(
            "sample {sample} was added as planes: its moves are unknown to the library"
        ))
    })
}

/// The policy index of legal move `uci` (castling as e1g1 or king takes rook) of position
/// `sample` (added as a FEN), in `*out`: the logit to read for it. A move that is not legal
/// there fails with `LC0RS_STATUS_POSITION`. Needs no compute.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `uci` is NULL or NUL-terminated and readable; `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_move_index(
    computation: Lc0rsComputation,
    sample: usize,
    uci: *const c_char,
    out: *mut usize,
) -> Lc0rsStatus {
    boundary(|| {
        // SAFETY: the caller's promise for `uci`.
        let uci = unsafe { required_str(uci, "uci") }?;
        if out.is_null() {
            return Err(Error::Null { what: "out" });
        }
        let index = with_computation(computation, |c| {
            c.check_sample(sample)?;
            fen_moves(c, sample)?
                .iter()
                .find(|(lc0, king_takes_rook, _)| lc0 == uci || king_takes_rook == uci)
                .map(|&(_, _, index)| index)
                .ok_or_else(|| {
                    Error::Position(ChessError::BadMove {
                        uci: uci.to_owned(),
                        ply: 0,
                        reason: format!("not a legal move of sample {sample}"),
                    })
                })
        })?;
        // SAFETY: the caller's promise for `out`.
        unsafe { write_out(out, index, "out") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_the_library() {
        assert_eq!(LC0RS_POLICY_SIZE, lc0rs::board::POLICY_SIZE);
        assert_eq!(LC0RS_INPUT_PLANES, lc0rs::board::INPUT_PLANES);
    }

    #[test]
    fn every_status_has_its_name() {
        for (status, name) in [
            (Lc0rsStatus::Ok, "OK"),
            (Lc0rsStatus::NullPointer, "NULL_POINTER"),
            (Lc0rsStatus::InvalidHandle, "INVALID_HANDLE"),
            (Lc0rsStatus::OutOfRange, "OUT_OF_RANGE"),
            (Lc0rsStatus::Busy, "BUSY"),
            (Lc0rsStatus::InvalidArgument, "INVALID_ARGUMENT"),
            (Lc0rsStatus::Load, "LOAD"),
            (Lc0rsStatus::Backend, "BACKEND"),
            (Lc0rsStatus::Position, "POSITION"),
            (Lc0rsStatus::State, "STATE"),
            (Lc0rsStatus::Panic, "PANIC"),
        ] {
            // SAFETY: a static NUL-terminated string.
            let got = unsafe { CStr::from_ptr(lc0rs_status_name(status as i32)) };
            assert_eq!(got.to_str().unwrap(), format!("LC0RS_STATUS_{name}"));
        }
    }

    #[test]
    fn a_computation_in_use_is_refused_not_shared() {
        let mut net = 0;
        let mut c = 0;
        // SAFETY: static strings and out pointers to locals.
        unsafe {
            assert_eq!(
                lc0rs_net_open(
                    c"bundled:tiny".as_ptr(),
                    c"cpu".as_ptr(),
                    std::ptr::null(),
                    &mut net
                ),
                Lc0rsStatus::Ok
            );
            assert_eq!(lc0rs_computation_create(net, &mut c), Lc0rsStatus::Ok);
        }
        // Another thread inside a call holds the computation's lock: every call, free
        // included, is refused at once and leaves it as it was.
        let shared = computation(c).unwrap();
        let held = shared.lock().unwrap();
        assert_eq!(lc0rs_computation_free(c), Lc0rsStatus::Busy);
        assert_eq!(lc0rs_computation_compute(c), Lc0rsStatus::Busy);
        let mut size = 7;
        // SAFETY: an out pointer to a local.
        let status = unsafe { lc0rs_computation_size(c, &mut size) };
        assert_eq!((status, size), (Lc0rsStatus::Busy, 7));
        drop(held);
        // SAFETY: an out pointer to a local.
        let status = unsafe { lc0rs_computation_size(c, &mut size) };
        assert_eq!((status, size), (Lc0rsStatus::Ok, 0));
        assert_eq!(lc0rs_computation_free(c), Lc0rsStatus::Ok);
        assert_eq!(lc0rs_computation_free(c), Lc0rsStatus::InvalidHandle);
        assert_eq!(lc0rs_net_free(net), Lc0rsStatus::Ok);
    }

    /// The bundled tiny net's file, as lc0 or any caller would hold it in memory.
    const TINY_GZ: &[u8] = include_bytes!("../../../weights/tiny.pb.gz");

    /// Opens `bytes` on the cpu backend; the status and the handle.
    fn open_bytes(bytes: &[u8]) -> (Lc0rsStatus, Lc0rsNet) {
        let mut net = 0;
        // SAFETY: a live slice, static strings and an out pointer to a local.
        let status = unsafe {
            lc0rs_net_open_bytes(
                bytes.as_ptr(),
                bytes.len(),
                c"tiny-in-memory".as_ptr(),
                c"cpu".as_ptr(),
                c"threads=1".as_ptr(),
                &mut net,
            )
        };
        (status, net)
    }

    /// Q, D, M and the 1858 logits of the start position (with its moves' history) on `net`.
    fn evaluate(net: Lc0rsNet) -> Vec<f32> {
        let mut c = 0;
        let mut values = vec![0.0; 3 + LC0RS_POLICY_SIZE];
        // SAFETY: out pointers to locals, a buffer of the stated length, static strings.
        unsafe {
            assert_eq!(lc0rs_computation_create(net, &mut c), Lc0rsStatus::Ok);
            assert_eq!(
                lc0rs_computation_add_fen(c, std::ptr::null(), c"e2e4 c7c5".as_ptr()),
                Lc0rsStatus::Ok
            );
            assert_eq!(lc0rs_computation_compute(c), Lc0rsStatus::Ok);
            assert_eq!(
                lc0rs_computation_get_q(c, 0, &mut values[0]),
                Lc0rsStatus::Ok
            );
            assert_eq!(
                lc0rs_computation_get_d(c, 0, &mut values[1]),
                Lc0rsStatus::Ok
            );
            assert_eq!(
                lc0rs_computation_get_m(c, 0, &mut values[2]),
                Lc0rsStatus::Ok
            );
            assert_eq!(
                lc0rs_computation_get_policy_logits(
                    c,
                    0,
                    values[3..].as_mut_ptr(),
                    LC0RS_POLICY_SIZE
                ),
                Lc0rsStatus::Ok
            );
        }
        assert_eq!(lc0rs_computation_free(c), Lc0rsStatus::Ok);
        values
    }

    fn last_error() -> String {
        // SAFETY: the thread's message, read before the next call.
        unsafe { CStr::from_ptr(lc0rs_last_error()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_net_in_memory_gzipped_or_plain_is_the_net_on_disk() {
        use std::io::Read;
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(TINY_GZ)
            .read_to_end(&mut plain)
            .unwrap();
        let mut by_name = 0;
        // SAFETY: static strings and an out pointer to a local.
        let status = unsafe {
            lc0rs_net_open(
                c"bundled:tiny".as_ptr(),
                c"cpu".as_ptr(),
                c"threads=1".as_ptr(),
                &mut by_name,
            )
        };
        assert_eq!(status, Lc0rsStatus::Ok);
        let want = evaluate(by_name);
        for bytes in [TINY_GZ, &plain[..]] {
            let (status, net) = open_bytes(bytes);
            assert_eq!(status, Lc0rsStatus::Ok, "{}", last_error());
            assert_eq!(evaluate(net), want);
            assert_eq!(lc0rs_net_free(net), Lc0rsStatus::Ok);
        }
        assert_eq!(lc0rs_net_free(by_name), Lc0rsStatus::Ok);
    }

    #[test]
    fn corrupt_bytes_are_a_load_error_naming_the_net() {
        let mut flipped = TINY_GZ.to_vec();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x55;
        let cases: [&[u8]; 5] = [
            &[],
            b"not a network at all",
            &TINY_GZ[..TINY_GZ.len() / 2],
            &flipped,
            b"1\n0.5 0.5",
        ];
        for bytes in cases {
            let (status, net) = open_bytes(bytes);
            assert_eq!(
                (status, net),
                (Lc0rsStatus::Load, 0),
                "{} bytes",
                bytes.len()
            );
            let message = last_error();
            assert!(message.contains("tiny-in-memory"), "{message}");
        }
        let mut net = 0;
        // SAFETY: NULL data is refused before anything is read.
        let status = unsafe {
            lc0rs_net_open_bytes(
                std::ptr::null(),
                0,
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null(),
                &mut net,
            )
        };
        assert_eq!(status, Lc0rsStatus::NullPointer);
    }

    #[test]
    fn a_panic_becomes_a_status_and_a_message() {
        let status = boundary(|| panic!("boom"));
        assert_eq!(status, Lc0rsStatus::Panic);
        // SAFETY: the thread's message, read before the next call.
        let message = unsafe { CStr::from_ptr(lc0rs_last_error()) };
        assert!(message.to_str().unwrap().contains("boom"));
    }
}
