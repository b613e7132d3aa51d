//! The emulator's device memory: host allocations, 256-byte aligned like a GPU allocator's,
//! zeroed (so that reading a buffer nothing wrote is not undefined behaviour on the host), and
//! registered, so that a GEMM whose arguments reach outside every live buffer is refused with an
//! error instead of reading or writing host memory it does not own.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::gpu::{DevicePtr, GpuBuffer, GpuError, GpuResult, MemorySpace};

/// The alignment of every emulated allocation (hipMalloc gives at least 256 bytes).
const ALIGNMENT: usize = 256;

/// The live allocations of one emulated GPU: start address → size in bytes.
#[derive(Debug, Default)]
pub struct Allocations {
    live: Mutex<BTreeMap<u64, usize>>,
}

impl Allocations {
    /// Allocates `bytes` of zeroed host memory that is freed, and unregistered, when the
    /// returned buffer is dropped.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> GpuResult<GpuBuffer> {
        let layout =
            Layout::from_size_align(bytes.max(1), ALIGNMENT).map_err(|e| GpuError::Call {
                call: "hipMalloc (emulated)",
                detail: format!("{bytes} bytes: {e}"),
            })?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(GpuError::Call {
                call: "hipMalloc (emulated)",
                detail: format!("out of host memory for {bytes} bytes"),
            });
        }
        let address = ptr as u64;
        self.lock().insert(address, bytes);
        let owner = Allocation {
            ptr: address,
            layout,
            registry: self.clone(),
        };
        // SAFETY: the address of the allocation (`bytes` bytes or more) the buffer owns: host
        // memory the emulated device's kernels and copies work on.
        Ok(unsafe {
            let ptr = DevicePtr::from_raw(address);
            GpuBuffer::new(self.space(), ptr, bytes, Box::new(owner))
        })
    }

    /// The memory space of the buffers made here (one registry per emulated GPU).
    pub fn space(self: &Arc<Self>) -> MemorySpace {
        MemorySpace(Arc::as_ptr(self) as usize)
    }

    /// Bytes allocated and not yet freed.
    pub fn used(&self) -> usize {
        self.lock().values().sum()
    }

    /// Whether `[start, start + bytes)` lies inside one live allocation.
    pub fn contains(&self, start: u64, bytes: usize) -> bool {
        let live = self.lock();
        live.range(..=start)
            .next_back()
            .is_some_and(|(&base, &len)| {
                start
                    .checked_add(bytes as u64)
                    .is_some_and(|end| end <= base + len as u64)
            })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, usize>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One allocation, freed on drop.
struct Allocation {
    ptr: u64,
    layout: Layout,
    registry: Arc<Allocations>,
}

// SAFETY: the allocation is plain host memory owned by this value alone; the address is only
// dereferenced by the emulator's kernels and GEMMs, which the device serialises.
unsafe impl Send for Allocation {}
// SAFETY: as above; `Allocation` itself offers no access to the memory.
unsafe impl Sync for Allocation {}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.ptr);
        // SAFETY: allocated in `Allocations::alloc` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr as *mut u8, self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_against_live_allocations() {
        let registry = Arc::new(Allocations::default());
        let a = registry.alloc(1000).unwrap();
        let start = a.ptr().raw();
        assert_eq!(start % ALIGNMENT as u64, 0);
        assert!(registry.contains(start, 1000));
        assert!(registry.contains(start + 998, 2));
        assert!(!registry.contains(start + 999, 2));
        assert!(!registry.contains(start - 1, 1));
        assert_eq!(registry.used(), 1000);
        drop(a);
        assert!(!registry.contains(start, 1));
        assert_eq!(registry.used(), 0);
    }

    #[test]
    fn memory_starts_zeroed() {
        let registry = Arc::new(Allocations::default());
        let a = registry.alloc(64).unwrap();
        // SAFETY: a live 64-byte allocation.
        let bytes = unsafe { std::slice::from_raw_parts(a.ptr().raw() as *const u8, 64) };
        assert!(bytes.iter().all(|&b| b == 0));
    }
}
