//! Graph capture that survives work outside it: a call of another thread that synchronises the
//! whole device (one that drops a backend, which frees pinned memory and unloads its kernels,
//! or that starts a kernel trace) invalidates a capture in progress. Nothing of an invalidated
//! capture ran, so it is captured again.

use crate::gpu::{GpuDevice, GpuError, GpuGraph, GpuResult};

/// Attempts at capturing a pass before an invalidated capture counts as an error.
const CAPTURE_ATTEMPTS: usize = 3;

/// Captures into a graph the work `enqueue` puts on `device`'s stream (see the module doc).
pub fn capture_graph<T>(
    device: &dyn GpuDevice,
    enqueue: impl FnMut() -> GpuResult<T>,
) -> GpuResult<(Box<dyn GpuGraph>, T)> {
    capture_retrying(|| device.begin_capture(), enqueue, || device.end_capture())
}

/// `begin`, `enqueue`, `end`, again while `end` says work outside invalidated the capture, up
/// to [`CAPTURE_ATTEMPTS`] times. An error of `enqueue` wins over one of `end`: it is the
/// cause.
fn capture_retrying<G, T>(
    mut begin: impl FnMut() -> GpuResult<()>,
    mut enqueue: impl FnMut() -> GpuResult<T>,
    mut end: impl FnMut() -> GpuResult<G>,
) -> GpuResult<(G, T)> {
    let mut attempt = 1;
    loop {
        begin()?;
        let enqueued = enqueue();
        let ended = end();
        if matches!(ended, Err(GpuError::CaptureInvalidated { .. })) && attempt < CAPTURE_ATTEMPTS {
            tracing::debug!(
                attempt,
                "a graph capture was invalidated from outside; capturing again"
            );
            attempt += 1;
            continue;
        }
        let value = enqueued?;
        return Ok((ended?, value));
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn invalidated() -> GpuError {
        GpuError::CaptureInvalidated { call: "end" }
    }

    fn failed(call: &'static str) -> GpuError {
        GpuError::Call {
            call,
            detail: String::new(),
        }
    }

    /// Runs a capture whose `end` gives `ends[i]` at attempt i (and `enqueue` `enqueues[i]`);
    /// the result and the number of attempts begun.
    fn run(
        ends: &[fn() -> GpuResult<&'static str>],
        enqueues: &[fn() -> GpuResult<u32>],
    ) -> (GpuResult<(&'static str, u32)>, usize) {
        let begun = Cell::new(0);
        let result = capture_retrying(
            || {
                begun.set(begun.get() + 1);
                Ok(())
            },
            || enqueues[begun.get() - 1](),
            || ends[begun.get() - 1](),
        );
        (result, begun.get())
    }

    #[test]
    fn an_invalidated_capture_is_captured_again() {
        let (result, attempts) = run(
            &[|| Err(invalidated()), || Err(invalidated()), || Ok("graph")],
            &[|| Err(failed("launch")), || Ok(1), || Ok(2)],
        );
        assert_eq!(result.unwrap(), ("graph", 2));
        assert_eq!(attempts, 3);
    }

    #[test]
    fn a_capture_invalidated_every_time_is_an_error() {
        let always_invalidated: [fn() -> GpuResult<&'static str>; CAPTURE_ATTEMPTS] =
            [|| Err(invalidated()); CAPTURE_ATTEMPTS];
        let fine: [fn() -> GpuResult<u32>; CAPTURE_ATTEMPTS] = [|| Ok(0); CAPTURE_ATTEMPTS];
        let (result, attempts) = run(&always_invalidated, &fine);
        assert!(matches!(result, Err(GpuError::CaptureInvalidated { .. })));
        assert_eq!(attempts, CAPTURE_ATTEMPTS);
        // The launch that failed inside the last invalidated capture is the error given.
        let failing: [fn() -> GpuResult<u32>; CAPTURE_ATTEMPTS] =
            [|| Err(failed("launch")); CAPTURE_ATTEMPTS];
        let (result, _) = run(&always_invalidated, &failing);
        assert!(matches!(result, Err(GpuError::Call { call: "launch", .. })));
    }

    #[test]
    fn other_errors_are_not_retried() {
        let (result, attempts) = run(&[|| Err(failed("instantiate"))], &[|| Ok(0)]);
        assert!(matches!(
            result,
            Err(GpuError::Call {
                call: "instantiate",
                ..
            })
        ));
        assert_eq!(attempts, 1);
        let (result, attempts) = run(&[|| Ok("graph")], &[|| Err(failed("launch"))]);
        assert!(matches!(result, Err(GpuError::Call { call: "launch", .. })));
        assert_eq!(attempts, 1);
    }
}
