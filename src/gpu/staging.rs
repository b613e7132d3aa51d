//! Pinned host memory that copies between host and device go through (pageable copies are
//! several times slower), grown on demand, and the download that comes back in pieces so that
//! the host reads one piece while the next ones are still on their way (at batch 1024 the
//! policy alone is 7.6 MB). Vendor-neutral: each vendor supplies its pinned allocation, its
//! copy and its completion marker.

use std::ops::Range;
use std::sync::Mutex;

use super::GpuResult;

/// Downloads come back in pieces of this size (a multiple of 4, so f32 results split evenly).
pub const DOWNLOAD_PIECE: usize = 1 << 20;

/// A vendor's pinned (page-locked) host allocation.
pub trait PinnedBuffer {
    /// Its size in bytes.
    fn capacity(&self) -> usize;
    /// The memory, once no copy into or out of it is pending.
    fn host_bytes(&mut self) -> GpuResult<&mut [u8]>;
}

/// One pinned buffer, reallocated larger (to a power of two) when a copy needs more.
pub struct Staging<P> {
    buffer: Mutex<Option<P>>,
}

impl<P> Default for Staging<P> {
    fn default() -> Self {
        Self {
            buffer: Mutex::new(None),
        }
    }
}

impl<P: PinnedBuffer> Staging<P> {
    /// Runs `work` on the first `bytes` of the buffer, held for it alone; `alloc(len)` makes a
    /// larger buffer when the one held is too small (or there is none yet).
    pub fn with_bytes<T>(
        &self,
        bytes: usize,
        alloc: impl FnOnce(usize) -> GpuResult<P>,
        work: impl FnOnce(&mut [u8]) -> GpuResult<T>,
    ) -> GpuResult<T> {
        let mut held = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        let buffer = match held.as_mut() {
            Some(buffer) if buffer.capacity() >= bytes => buffer,
            _ => {
                // The old buffer goes first, so that the two are never held at once.
                *held = None;
                held.insert(alloc(bytes.next_power_of_two())?)
            }
        };
        work(&mut buffer.host_bytes()?[..bytes])
    }

    /// Uploads `bytes` through the buffer: `fill` writes them where the copy reads them,
    /// `copy(staged)` enqueues the host-to-device copy and `wait` waits for it, so that the
    /// buffer is not reused while the copy may still read it.
    pub fn upload(
        &self,
        bytes: usize,
        alloc: impl FnOnce(usize) -> GpuResult<P>,
        fill: &mut dyn FnMut(&mut [u8]),
        copy: impl FnOnce(&[u8]) -> GpuResult<()>,
        wait: impl FnOnce() -> GpuResult<()>,
    ) -> GpuResult<()> {
        self.with_bytes(bytes, alloc, |staged| {
            fill(staged);
            copy(staged)?;
            wait()
        })
    }

    /// Downloads `bytes` through the buffer in [`pieces`] (see [`download_in_pieces`]).
    pub fn download<M>(
        &self,
        bytes: usize,
        alloc: impl FnOnce(usize) -> GpuResult<P>,
        copy: impl FnMut(Range<usize>, &mut [u8]) -> GpuResult<M>,
        wait: impl FnMut(M) -> GpuResult<()>,
        read: &mut dyn FnMut(&[u8]),
    ) -> GpuResult<()> {
        self.with_bytes(bytes, alloc, |host| {
            download_in_pieces(host, copy, wait, read)
        })
    }
}

/// The pieces a download of `bytes` is split into.
pub fn pieces(bytes: usize) -> impl Iterator<Item = Range<usize>> {
    (0..bytes)
        .step_by(DOWNLOAD_PIECE)
        .map(move |start| start..(start + DOWNLOAD_PIECE).min(bytes))
}

/// Downloads into `host` in [`pieces`]: `copy(range, piece)` enqueues one piece's copy and
/// returns a marker of its completion; then, piece by piece, `wait(marker)` and `read(piece)`.
/// Where a copy or a wait fails, the pieces already enqueued are still waited for before the
/// error returns, so that no copy is left writing into memory the next transfer reuses.
pub fn download_in_pieces<M>(
    host: &mut [u8],
    mut copy: impl FnMut(Range<usize>, &mut [u8]) -> GpuResult<M>,
    mut wait: impl FnMut(M) -> GpuResult<()>,
    read: &mut dyn FnMut(&[u8]),
) -> GpuResult<()> {
    let mut pending = Vec::new();
    let mut failed = None;
    for piece in pieces(host.len()) {
        match copy(piece.clone(), &mut host[piece.clone()]) {
            Ok(landed) => pending.push((piece, landed)),
            Err(error) => {
                failed = Some(error);
                break;
            }
        }
    }
    for (piece, landed) in pending {
        let waited = wait(landed);
        if failed.is_none() {
            match waited {
                Ok(()) => read(&host[piece]),
                Err(error) => failed = Some(error),
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_download_once_in_order() {
        assert_eq!(pieces(0).count(), 0);
        assert_eq!(
            pieces(10).collect::<Vec<_>>(),
            vec![Range { start: 0, end: 10 }]
        );
        let big = 2 * DOWNLOAD_PIECE + 12;
        assert_eq!(
            pieces(big).collect::<Vec<_>>(),
            [
                0..DOWNLOAD_PIECE,
                DOWNLOAD_PIECE..2 * DOWNLOAD_PIECE,
                2 * DOWNLOAD_PIECE..big
            ]
        );
    }

    #[test]
    fn every_piece_is_read_after_its_copy_landed() {
        let source: Vec<u8> = (0..DOWNLOAD_PIECE + 5).map(|i| (i % 251) as u8).collect();
        let mut host = vec![0u8; source.len()];
        let mut landed = Vec::new();
        let mut read = Vec::new();
        download_in_pieces(
            &mut host,
            |range, piece| {
                piece.copy_from_slice(&source[range.clone()]);
                Ok(range.start)
            },
            |marker| {
                landed.push(marker);
                Ok(())
            },
            &mut |piece| read.extend_from_slice(piece),
        )
        .unwrap();
        assert_eq!(landed, [0, DOWNLOAD_PIECE]);
        assert_eq!(read, source);
    }

    #[test]
    fn a_failed_piece_still_waits_for_the_others_and_reads_none_after_it() {
        let mut host = vec![0u8; 3 * DOWNLOAD_PIECE];
        let mut waited = Vec::new();
        let mut read = 0;
        let result = download_in_pieces(
            &mut host,
            |range, _| Ok(range.start / DOWNLOAD_PIECE),
            |piece| {
                waited.push(piece);
                if piece == 1 {
                    Err(crate::gpu::GpuError::Call {
                        call: "wait",
                        detail: "a fault".to_owned(),
                    })
                } else {
                    Ok(())
                }
            },
            &mut |_| read += 1,
        );
        assert!(result.is_err());
        assert_eq!(waited, [0, 1, 2], "every enqueued piece waited for");
        assert_eq!(read, 1, "only the piece before the failure is read");
        // A copy that cannot be enqueued: the ones before it are still waited for.
        let mut waited = Vec::new();
        let result = download_in_pieces(
            &mut host,
            |range, _| {
                if range.start == 2 * DOWNLOAD_PIECE {
                    Err(crate::gpu::GpuError::Call {
                        call: "copy",
                        detail: "refused".to_owned(),
                    })
                } else {
                    Ok(range.start)
                }
            },
            |piece| {
                waited.push(piece);
                Ok(())
            },
            &mut |_| panic!("nothing is read from a failed download"),
        );
        assert!(matches!(
            result,
            Err(crate::gpu::GpuError::Call { call: "copy", .. })
        ));
        assert_eq!(waited, [0, DOWNLOAD_PIECE]);
    }

    struct Heap(Vec<u8>);

    impl PinnedBuffer for Heap {
        fn capacity(&self) -> usize {
            self.0.len()
        }
        fn host_bytes(&mut self) -> GpuResult<&mut [u8]> {
            Ok(&mut self.0)
        }
    }

    #[test]
    fn the_buffer_grows_to_a_power_of_two_and_is_kept() {
        let staging = Staging::default();
        let mut sizes = Vec::new();
        let mut alloc = |len: usize| {
            sizes.push(len);
            Ok(Heap(vec![0; len]))
        };
        let len = |bytes: &mut [u8]| Ok(bytes.len());
        assert_eq!(staging.with_bytes(100, &mut alloc, len).unwrap(), 100);
        assert_eq!(staging.with_bytes(128, &mut alloc, len).unwrap(), 128);
        assert_eq!(staging.with_bytes(129, &mut alloc, len).unwrap(), 129);
        assert_eq!(sizes, [128, 256]);
    }
}
