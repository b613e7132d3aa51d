//! Device addresses and the memory they point into. A [`DevicePtr`] comes from a device's
//! allocation (through [`GpuBuffer`]) or from an `unsafe` claim that an address is valid, so
//! safe code can only hand kernels, copies and GEMMs addresses inside memory it owns.

use std::fmt;

/// An address in device memory (for the emulated device, in host memory).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevicePtr(u64);

impl DevicePtr {
    /// Wraps a raw device address.
    ///
    /// # Safety
    /// `address` must point into device memory of the device it is used on, memory that stays
    /// allocated for as long as the pointer (or one derived from it) is used; every use may
    /// read or write the bytes it names there.
    pub const unsafe fn from_raw(address: u64) -> Self {
        Self(address)
    }

    /// The raw address, for a vendor call.
    pub const fn raw(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevicePtr({:#x})", self.0)
    }
}

impl fmt::LowerHex for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// Memory on the device, freed when dropped.
pub struct GpuBuffer {
    ptr: DevicePtr,
    bytes: usize,
    _owner: Box<dyn std::any::Any + Send + Sync>,
}

impl GpuBuffer {
    /// `bytes` of device memory at `ptr`, kept allocated by `owner` (freed when it drops).
    pub fn new(ptr: DevicePtr, bytes: usize, owner: Box<dyn std::any::Any + Send + Sync>) -> Self {
        Self {
            ptr,
            bytes,
            _owner: owner,
        }
    }

    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The address `offset` bytes in, checked against the size.
    pub fn at(&self, offset: usize) -> DevicePtr {
        assert!(
            offset <= self.bytes,
            "offset {offset} beyond a {}-byte buffer",
            self.bytes
        );
        DevicePtr(self.ptr.0 + offset as u64)
    }
}

impl fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuBuffer({:#x}, {} bytes)", self.ptr.0, self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(bytes: usize) -> GpuBuffer {
        // SAFETY: the address is only compared and offset here, never used on a device.
        let ptr = unsafe { DevicePtr::from_raw(0x1000) };
        GpuBuffer::new(ptr, bytes, Box::new(()))
    }

    #[test]
    fn addresses_inside_a_buffer_are_offsets_from_its_start() {
        let b = buffer(256);
        assert_eq!(b.at(0), b.ptr());
        assert_eq!(b.at(255).raw(), 0x10ff);
        assert_eq!(b.at(256).raw(), 0x1100);
    }

    #[test]
    #[should_panic(expected = "offset 257 beyond a 256-byte buffer")]
    fn an_address_past_the_end_is_refused() {
        buffer(256).at(257);
    }
}
