//! The timing events a device has recorded since the last [`EventLog::clear`], addressed by
//! the index `GpuDevice::record_event` returned: one log for every vendor's event type.

use std::sync::{Mutex, MutexGuard};

use super::{GpuError, GpuResult};

/// Recorded events, in order.
pub struct EventLog<E> {
    events: Mutex<Vec<E>>,
}

impl<E> Default for EventLog<E> {
    fn default() -> Self {
        Self {
            events: Mutex::new(Vec::new()),
        }
    }
}

impl<E> EventLog<E> {
    /// Adds a recorded event; returns its index.
    pub fn push(&self, event: E) -> usize {
        let mut events = self.lock();
        events.push(event);
        events.len() - 1
    }

    /// `elapsed(start, end)` for the events at two indices; an index never returned is an error.
    pub fn between(
        &self,
        start: usize,
        end: usize,
        elapsed: impl FnOnce(&E, &E) -> GpuResult<f32>,
    ) -> GpuResult<f32> {
        let events = self.lock();
        match (events.get(start), events.get(end)) {
            (Some(a), Some(b)) => elapsed(a, b),
            _ => Err(GpuError::Call {
                call: "elapsed_ms",
                detail: format!(
                    "events {start} and {end} asked for, {} recorded",
                    events.len()
                ),
            }),
        }
    }

    /// Forgets every event (their indices are reused from 0).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> MutexGuard<'_, Vec<E>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_count_from_zero_after_each_clear() {
        let log = EventLog::default();
        assert_eq!(log.push(10.0f32), 0);
        assert_eq!(log.push(12.5), 1);
        assert_eq!(log.between(0, 1, |a, b| Ok(b - a)).unwrap(), 2.5);
        let error = log.between(0, 2, |_, _| Ok(0.0)).unwrap_err().to_string();
        assert!(
            error.contains("events 0 and 2") && error.contains("2 recorded"),
            "{error}"
        );
        log.clear();
        assert_eq!(log.push(1.0), 0);
    }
}
