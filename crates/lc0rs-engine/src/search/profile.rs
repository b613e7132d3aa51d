//! Where a search's threads spend their time: gathering leaves, in backend calls, backing up,
//! waiting for the tree's lock and waiting out collisions, summed over the threads; and for
//! how much of the search at least one backend call was in flight (the GPU's chance to be
//! busy). The UCI engine prints it after each search, so that a search slower than its
//! backend shows where it waits.

use std::time::{Duration, Instant};

/// The phases of a search thread's loop that are timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Walking the tree, and taking in the leaves it started (holding the lock).
    Gather,
    /// Playing out, judging and encoding leaves, and turning policies into children
    /// (without the lock, on the thread pool).
    Leaves,
    /// The backend call (without the lock).
    Backend,
    /// Expanding and backing up a batch (holding the lock).
    BackUp,
    /// Waiting for another thread to release the lock.
    LockWait,
    /// Sleeping because every playout collided with another thread's batch.
    CollisionWait,
    /// A search thread other than the first, sleeping until the tree is large enough for it
    /// to gather (`SearchParams::single_thread_visits`).
    JoinWait,
}

/// Time per phase summed over the threads, and how long a backend call was in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimes {
    pub gather: Duration,
    pub leaves: Duration,
    pub backend: Duration,
    pub back_up: Duration,
    pub lock_wait: Duration,
    pub collision_wait: Duration,
    pub join_wait: Duration,
    /// How long at least one backend call was in flight.
    pub backend_in_flight: Duration,
}

impl PhaseTimes {
    /// One line for a search that lasted `elapsed`: each phase in ms (summed over the
    /// threads), and the share of the search with a backend call in flight.
    pub fn summary(&self, elapsed: Duration) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let busy = ms(self.backend_in_flight) / ms(elapsed).max(1e-9) * 100.0;
        format!(
            "thread time (ms): gather {:.0}, leaves {:.0}, backend {:.0}, back-up {:.0}, \
             lock wait {:.0}, collision wait {:.0}, join wait {:.0}; a backend call in flight \
             {busy:.0}% of {:.0} ms",
            ms(self.gather),
            ms(self.leaves),
            ms(self.backend),
            ms(self.back_up),
            ms(self.lock_wait),
            ms(self.collision_wait),
            ms(self.join_wait),
            ms(elapsed),
        )
    }
}

/// What a search records as it runs: the time per phase and each backend call's span.
#[derive(Debug, Clone, Default)]
pub struct SearchProfile {
    times: PhaseTimes,
    calls: Vec<(Instant, Instant)>,
}

impl SearchProfile {
    pub fn add(&mut self, phase: Phase, time: Duration) {
        let t = &mut self.times;
        let total = match phase {
            Phase::Gather => &mut t.gather,
            Phase::Leaves => &mut t.leaves,
            Phase::Backend => &mut t.backend,
            Phase::BackUp => &mut t.back_up,
            Phase::LockWait => &mut t.lock_wait,
            Phase::CollisionWait => &mut t.collision_wait,
            Phase::JoinWait => &mut t.join_wait,
        };
        *total += time;
    }

    /// Records one backend call (its time also counts as [`Phase::Backend`]).
    pub fn add_call(&mut self, start: Instant, end: Instant) {
        self.add(Phase::Backend, end.saturating_duration_since(start));
        self.calls.push((start, end));
    }

    /// The totals so far, with the length of the union of the backend calls' spans.
    pub fn times(&self) -> PhaseTimes {
        PhaseTimes {
            backend_in_flight: union_length(&self.calls),
            ..self.times
        }
    }
}

/// The length of the union of the spans.
fn union_length(spans: &[(Instant, Instant)]) -> Duration {
    let mut spans = spans.to_vec();
    spans.sort_unstable();
    let mut total = Duration::ZERO;
    let mut open: Option<(Instant, Instant)> = None;
    for (start, end) in spans {
        open = match open {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + open.map_or(Duration::ZERO, |(s, e)| e - s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_in_flight_count_overlaps_once_and_gaps_not_at_all() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut profile = SearchProfile::default();
        // [0,10] and [5,12] overlap (12 ms), [20,25] stands alone (5 ms), [21,22] inside it.
        for (s, e) in [(20, 25), (0, 10), (21, 22), (5, 12)] {
            profile.add_call(at(s), at(e));
        }
        let times = profile.times();
        assert_eq!(times.backend_in_flight, Duration::from_millis(17));
        assert_eq!(times.backend, Duration::from_millis(10 + 7 + 5 + 1));
        assert_eq!(SearchProfile::default().times(), PhaseTimes::default());
    }

    #[test]
    fn the_summary_names_each_phase_and_the_busy_share() {
        let mut profile = SearchProfile::default();
        let t0 = Instant::now();
        profile.add_call(t0, t0 + Duration::from_millis(30));
        profile.add(Phase::Gather, Duration::from_millis(12));
        profile.add(Phase::Leaves, Duration::from_millis(7));
        profile.add(Phase::LockWait, Duration::from_millis(4));
        let line = profile.times().summary(Duration::from_millis(40));
        assert_eq!(
            line,
            "thread time (ms): gather 12, leaves 7, backend 30, back-up 0, lock wait 4, \
             collision wait 0, join wait 0; a backend call in flight 75% of 40 ms"
        );
    }
}
