//! Device addresses and the memory they point into. A [`DevicePtr`] is a plain address: it comes
//! from a device's allocation (through [`GpuBuffer`]) or from an `unsafe` claim that an address
//! is valid, and every call that hands one to the device is `unsafe` under the
//! [device-memory contract](super#the-device-memory-contract). A [`GpuBuffer`]'s own copies
//! and fill check their range and borrow the buffer, so they are safe.

use std::fmt;

use super::{GpuDevice, GpuError, GpuResult};

/// Which device memory an allocation belongs to: one per GPU (its lanes share it), so that a
/// buffer's safe copies refuse a device that did not make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemorySpace(pub usize);

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
    space: MemorySpace,
    _owner: Box<dyn std::any::Any + Send + Sync>,
}

impl GpuBuffer {
    /// `bytes` of device memory at `ptr` in `space`, kept allocated by `owner` (freed when it
    /// drops).
    ///
    /// # Safety
    /// `ptr` is the start of at least `bytes` bytes of device memory of the devices whose
    /// [`GpuDevice::memory_space`] is `space`, allocated until `owner` drops: the buffer's
    /// safe copies read and write them.
    pub unsafe fn new(
        space: MemorySpace,
        ptr: DevicePtr,
        bytes: usize,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Self {
        Self {
            ptr,
            bytes,
            space,
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

    /// The address of `bytes` bytes from `offset` on, for a copy on `device`: an error unless
    /// they lie inside the buffer and the device is the one (or a lane of the one) that made
    /// it.
    fn range(
        &self,
        device: &dyn GpuDevice,
        offset: usize,
        bytes: usize,
        call: &'static str,
    ) -> GpuResult<DevicePtr> {
        if device.memory_space() != self.space {
            return Err(GpuError::Call {
                call,
                detail: format!("{self:?} belongs to another device"),
            });
        }
        match offset.checked_add(bytes) {
            Some(end) if end <= self.bytes => Ok(DevicePtr(self.ptr.0 + offset as u64)),
            _ => Err(GpuError::Call {
                call,
                detail: format!("{bytes} bytes at offset {offset} overrun {self:?}"),
            }),
        }
    }

    /// Copies `src` into the buffer from `offset` on (stream-ordered on `device`; `src` is not
    /// needed after the call).
    pub fn copy_from_host(
        &mut self,
        device: &dyn GpuDevice,
        offset: usize,
        src: &[u8],
    ) -> GpuResult<()> {
        let dst = self.range(device, offset, src.len(), "GpuBuffer::copy_from_host")?;
        // SAFETY: `src.len()` bytes inside this live buffer of `device`'s memory, borrowed
        // mutably (no safe access runs beside it); work enqueued earlier through raw pointers
        // is ordered or kept apart by whoever enqueued it (the contract's point 3).
        unsafe { device.upload(dst, src) }
    }

    /// [`GpuDevice::upload_with`] into the buffer from `offset` on, checked like
    /// [`copy_from_host`](Self::copy_from_host).
    pub fn copy_from_host_with(
        &mut self,
        device: &dyn GpuDevice,
        offset: usize,
        bytes: usize,
        fill: &mut dyn FnMut(&mut [u8]),
    ) -> GpuResult<()> {
        let dst = self.range(device, offset, bytes, "GpuBuffer::copy_from_host_with")?;
        // SAFETY: as in `copy_from_host`, for `bytes` bytes.
        unsafe { device.upload_with(dst, bytes, fill) }
    }

    /// Copies `dst.len()` bytes from `offset` on to the host, waiting for `device`'s stream.
    pub fn copy_to_host(
        &self,
        device: &dyn GpuDevice,
        offset: usize,
        dst: &mut [u8],
    ) -> GpuResult<()> {
        let src = self.range(device, offset, dst.len(), "GpuBuffer::copy_to_host")?;
        // SAFETY: `dst.len()` bytes inside this live buffer of `device`'s memory, borrowed (no
        // safe write runs beside it; raw-pointer work is kept apart by its caller).
        unsafe { device.download(src, dst) }
    }

    /// [`GpuDevice::download_with`] of `bytes` bytes from `offset` on, checked like
    /// [`copy_to_host`](Self::copy_to_host).
    pub fn copy_to_host_with(
        &self,
        device: &dyn GpuDevice,
        offset: usize,
        bytes: usize,
        read: &mut dyn FnMut(&[u8]),
    ) -> GpuResult<()> {
        let src = self.range(device, offset, bytes, "GpuBuffer::copy_to_host_with")?;
        // SAFETY: as in `copy_to_host`, for `bytes` bytes.
        unsafe { device.download_with(src, bytes, read) }
    }

    /// Fills the whole buffer with the byte `value` (stream-ordered on `device`).
    pub fn fill(&mut self, device: &dyn GpuDevice, value: u8) -> GpuResult<()> {
        let dst = self.range(device, 0, self.bytes, "GpuBuffer::fill")?;
        // SAFETY: the whole of this live buffer of `device`'s memory, borrowed mutably.
        unsafe { device.fill(dst, self.bytes, value) }
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
        unsafe {
            let ptr = DevicePtr::from_raw(0x1000);
            GpuBuffer::new(MemorySpace(0), ptr, bytes, Box::new(()))
        }
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
