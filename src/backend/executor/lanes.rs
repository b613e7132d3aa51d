//! The lanes of a GPU backend: a pool of per-call device state (stream, buffers, graphs) that
//! grows on demand up to a limit and serves waiting calls in arrival order.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::gpu::GpuResult;

/// The lanes of a backend and the calls waiting for one. Calls are served first come, first
/// served: threads that share fewer lanes than they are take turns, which is what
/// backendbench's per-thread timing (lc0's) assumes (an unfair lock let one thread take the
/// lane again and again, and the formula then reported up to twice the real rate).
pub struct LanePool<L> {
    state: Mutex<PoolState<L>>,
    changed: Condvar,
}

struct PoolState<L> {
    lanes: Vec<Arc<Mutex<L>>>,
    /// Indices of the lanes no call holds.
    free: Vec<usize>,
    /// The ticket the next call gets, and the one whose turn it is.
    next_ticket: u64,
    serving: u64,
}

impl<L> LanePool<L> {
    pub fn new(first: L) -> Self {
        Self {
            state: Mutex::new(PoolState {
                lanes: vec![Arc::new(Mutex::new(first))],
                free: vec![0],
                next_ticket: 0,
                serving: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState<L>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn lanes(&self) -> Vec<Arc<Mutex<L>>> {
        self.lock().lanes.clone()
    }

    /// Takes a lane in turn: the most recently freed one, else one made by `make` while there
    /// are fewer than `most`, else waits for one.
    pub fn take(
        &self,
        most: usize,
        make: impl FnOnce() -> GpuResult<L>,
    ) -> GpuResult<Taken<'_, L>> {
        let index = self.take_index(most, make)?;
        Ok(Taken { pool: self, index })
    }

    fn take_index(&self, most: usize, make: impl FnOnce() -> GpuResult<L>) -> GpuResult<usize> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        loop {
            if state.serving == ticket {
                if let Some(index) = state.free.pop() {
                    state.serving += 1;
                    self.changed.notify_all();
                    return Ok(index);
                }
                if state.lanes.len() < most {
                    // Made with the pool locked: the calls after this one wait for it anyway.
                    let made = make();
                    state.serving += 1;
                    self.changed.notify_all();
                    state.lanes.push(Arc::new(Mutex::new(made?)));
                    return Ok(state.lanes.len() - 1);
                }
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn give_back(&self, index: usize) {
        self.lock().free.push(index);
        self.changed.notify_all();
    }
}

/// A lane taken from its pool, given back when dropped (also when the call fails or panics).
pub struct Taken<'a, L> {
    pool: &'a LanePool<L>,
    index: usize,
}

impl<L> Taken<'_, L> {
    pub fn lane(&self) -> Arc<Mutex<L>> {
        self.pool.lock().lanes[self.index].clone()
    }
}

impl<L> Drop for Taken<'_, L> {
    fn drop(&mut self) {
        self.pool.give_back(self.index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::GpuError;

    #[test]
    fn lanes_are_made_up_to_the_limit_and_waiting_calls_take_turns() {
        let pool = LanePool::new(0usize);
        // Free lanes first; a new one only while all are taken; never more than `most`.
        let first = pool.take(2, || panic!("lane 0 is free")).unwrap();
        let second = pool.take(2, || Ok(1)).unwrap();
        assert_eq!((first.index, second.index), (0, 1));
        assert_eq!(*second.lane().lock().unwrap(), 1);
        drop(first);
        let again = pool.take(2, || panic!("lane 0 is free again")).unwrap();
        assert_eq!(again.index, 0);
        let failed = LanePool::new(0usize);
        let _held = failed.take(2, || panic!("free")).unwrap();
        assert!(
            failed
                .take(2, || Err(GpuError::NoDevice("x".into())))
                .is_err()
        );
        // One lane: a call that waits for it gets it before the holder, who gives it back and
        // asks again at once (an unfair lock would hand it straight back to the holder).
        let single = LanePool::new(0usize);
        let order = Mutex::new(Vec::new());
        let held = single.take(1, || panic!("free")).unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let taken = single.take(1, || panic!("only one lane")).unwrap();
                order.lock().unwrap().push("waiting call");
                drop(taken);
            });
            // Once the other call has its ticket, it is waiting for the lane.
            while single.lock().next_ticket < 2 {
                std::thread::yield_now();
            }
            drop(held);
            let again = single.take(1, || panic!("only one lane")).unwrap();
            order.lock().unwrap().push("holder again");
            drop(again);
        });
        assert_eq!(
            order.into_inner().unwrap(),
            ["waiting call", "holder again"]
        );
    }
}
