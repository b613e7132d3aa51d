//! The search's task workers (lc0's TaskWorkers): threads that help the search threads walk a
//! large pass's subtrees, prepare its leaves and turn a batch's policies into children. As
//! lc0's, they live for one search, spin while a search thread is gathering (so that handing
//! them work costs no wake-up), sleep otherwise, and the search thread that posts work takes a
//! share of it itself: it waits only for chunks a worker has already begun, never for a worker
//! to wake, so that a loaded host (other engines on the cores) slows the search no more than
//! having no workers would. A panic in a worker's chunk is raised again on the thread that
//! posted the work, which would otherwise wait for that chunk for ever.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::Scope;
use std::time::Duration;

/// Items per chunk; fewer than twice this are mapped on the calling thread, where sharing the
/// work would cost more than it saves.
const ITEMS_PER_CHUNK: usize = 16;

/// lc0's ceiling on the task workers of one search thread.
const MAX_PER_SEARCH_THREAD: usize = 4;

/// Spins between two yields of an idle worker while the search is busy.
const SPINS_PER_YIELD: u32 = 256;

/// How long a sleeping worker waits before looking again (it is woken earlier when a search
/// thread starts gathering or the search ends).
const SLEEP: Duration = Duration::from_millis(5);

/// The workers of one search and the work posted to them. `'c` is how long the work may borrow
/// (the search's shared state).
pub(super) struct TaskWorkers<'c> {
    count: usize,
    /// Maps with chunks not yet claimed, oldest first.
    queue: Mutex<VecDeque<Arc<dyn Job + 'c>>>,
    /// How many maps `queue` holds, read by spinning workers without taking its lock.
    queued: AtomicUsize,
    /// Search threads in a phase that posts work ([`TaskWorkers::busy`]): workers spin while
    /// there is one.
    busy: AtomicUsize,
    stopped: AtomicBool,
    /// Where idle workers sleep.
    idle: Mutex<()>,
    wake: Condvar,
}

/// The task workers could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {count} task worker threads: {source}")]
pub struct TaskWorkersError {
    count: usize,
    source: std::io::Error,
}

impl<'c> TaskWorkers<'c> {
    /// `count` workers, started by [`TaskWorkers::run`] (none: everything on the caller).
    pub fn new(count: usize) -> Self {
        Self {
            count,
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            idle: Mutex::new(()),
            wake: Condvar::new(),
        }
    }

    /// Runs `body` with the workers started in `scope`, and stops them when it returns or
    /// unwinds.
    pub fn run<'scope, 'env, T>(
        &'env self,
        scope: &'scope Scope<'scope, 'env>,
        body: impl FnOnce() -> T,
    ) -> Result<T, TaskWorkersError> {
        let stop_on_exit = StopOnDrop(self);
        for i in 0..self.count {
            std::thread::Builder::new()
                .name(format!("lc0rs-task-{i}"))
                .spawn_scoped(scope, || self.work())
                .map_err(|source| TaskWorkersError {
                    count: self.count,
                    source,
                })?;
        }
        let out = body();
        drop(stop_on_exit);
        Ok(out)
    }

    /// Marks a search thread busy until the guard drops: idle workers wake and spin meanwhile.
    pub fn busy(&self) -> Busy<'_, 'c> {
        if self.busy.fetch_add(1, Ordering::AcqRel) == 0 && self.count > 0 {
            let _idle = lock(&self.idle);
            self.wake.notify_all();
        }
        Busy(self)
    }

    /// The worker threads (none: every map runs on its caller).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Maps `items` in their order with a per-thread state made by `init`, in chunks shared
    /// with the workers (see [`Chunks`]), the caller taking chunks too; all on the caller where
    /// that makes fewer than two chunks (or there are no workers).
    pub fn map<T, S, R>(
        &self,
        items: Vec<T>,
        chunks: Chunks,
        init: impl Fn() -> S + Send + Sync + 'c,
        f: impl Fn(&mut S, T) -> R + Send + Sync + 'c,
    ) -> Vec<R>
    where
        T: Send + 'c,
        R: Send + 'c,
    {
        let chunk_count = match chunks {
            Chunks::Even => (items.len() / ITEMS_PER_CHUNK).min(self.count + 1),
            Chunks::EachItem => items.len(),
        };
        if self.count == 0 || chunk_count < 2 {
            let mut state = init();
            return items.into_iter().map(|item| f(&mut state, item)).collect();
        }
        let _busy = self.busy();
        let job = Arc::new(MapJob::new(items, chunk_count, init, f));
        let posted: Arc<dyn Job + 'c> = job.clone();
        lock(&self.queue).push_back(posted.clone());
        self.queued.fetch_add(1, Ordering::AcqRel);
        job.work();
        // Every chunk is claimed now: the job leaves the queue.
        lock(&self.queue).retain(|queued| !Arc::ptr_eq(queued, &posted));
        self.queued.fetch_sub(1, Ordering::AcqRel);
        job.wait_done();
        if let Some(panic) = lock(&job.panic).take() {
            resume_unwind(panic);
        }
        job.results()
    }

    /// A worker's loop: run the oldest posted work, else spin while a search thread is busy,
    /// else sleep, until the search ends.
    fn work(&self) {
        let mut spins = 0u32;
        while !self.stopped.load(Ordering::Acquire) {
            let front = if self.queued.load(Ordering::Acquire) > 0 {
                lock(&self.queue).front().cloned()
            } else {
                None
            };
            if let Some(job) = front {
                job.work();
                spins = 0;
                continue;
            }
            if self.busy.load(Ordering::Acquire) > 0 {
                pause(&mut spins);
                continue;
            }
            let idle = lock(&self.idle);
            if self.busy.load(Ordering::Acquire) == 0 && !self.stopped.load(Ordering::Acquire) {
                drop(self.wake.wait_timeout(idle, SLEEP));
            }
        }
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let _idle = lock(&self.idle);
        self.wake.notify_all();
    }
}

/// How a map's items are cut into the chunks that threads claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunks {
    /// Runs of at least [`ITEMS_PER_CHUNK`] items, at most one a thread: many cheap items.
    Even,
    /// Every item a chunk of its own, claimed in order by whichever thread is free: few items,
    /// each much work and unequal.
    EachItem,
}

/// A search thread busy (see [`TaskWorkers::busy`]).
pub(super) struct Busy<'t, 'c>(&'t TaskWorkers<'c>);

impl Drop for Busy<'_, '_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Stops the workers when dropped, so that an unwinding search ends them too (the scope would
/// otherwise wait for them for ever).
struct StopOnDrop<'t, 'c>(&'t TaskWorkers<'c>);

impl Drop for StopOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Work posted to the workers: whoever calls [`Job::work`] claims chunks until none is left.
trait Job: Send + Sync {
    fn work(&self);
}

/// One map: its items in chunks, claimed in order, and each chunk's results.
struct MapJob<T, R, I, F> {
    chunks: Vec<Mutex<Option<Vec<T>>>>,
    results: Vec<Mutex<Option<Vec<R>>>>,
    /// The next chunk to claim.
    next: AtomicUsize,
    /// Chunks whose results are in (or that panicked).
    done: AtomicUsize,
    /// The first panic of a chunk, raised again on the caller.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    init: I,
    f: F,
}

impl<T, R, S, I, F> MapJob<T, R, I, F>
where
    I: Fn() -> S,
    F: Fn(&mut S, T) -> R,
{
    fn new(items: Vec<T>, chunk_count: usize, init: I, f: F) -> Self {
        let per_chunk = items.len().div_ceil(chunk_count);
        let mut items = items.into_iter();
        let chunks = (0..chunk_count)
            .map(|_| Mutex::new(Some(items.by_ref().take(per_chunk).collect())))
            .collect();
        Self {
            chunks,
            results: (0..chunk_count).map(|_| Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            panic: Mutex::new(None),
            init,
            f,
        }
    }

    /// Waits for the chunks claimed by workers (the caller's own are done).
    fn wait_done(&self) {
        let mut spins = 0u32;
        while self.done.load(Ordering::Acquire) < self.chunks.len() {
            pause(&mut spins);
        }
    }

    /// The results in the items' order, once every chunk is done.
    fn results(&self) -> Vec<R> {
        self.results
            .iter()
            .flat_map(|slot| lock(slot).take().unwrap_or_default())
            .collect()
    }
}

impl<T, R, S, I, F> Job for MapJob<T, R, I, F>
where
    T: Send,
    R: Send,
    I: Fn() -> S + Send + Sync,
    F: Fn(&mut S, T) -> R + Send + Sync,
{
    fn work(&self) {
        let mut state = None;
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            let Some(chunk) = self.chunks.get(i) else {
                return;
            };
            let items = lock(chunk).take().unwrap_or_default();
            let run = catch_unwind(AssertUnwindSafe(|| {
                let state = state.get_or_insert_with(&self.init);
                items
                    .into_iter()
                    .map(|item| (self.f)(state, item))
                    .collect::<Vec<R>>()
            }));
            match run {
                Ok(out) => *lock(&self.results[i]) = Some(out),
                Err(panic) => {
                    // The state may be half-changed: the next chunk starts a new one.
                    state = None;
                    lock(&self.panic).get_or_insert(panic);
                }
            }
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// One round of a spin-wait: a spin-loop hint, and every [`SPINS_PER_YIELD`] rounds the core
/// given up to another thread.
fn pause(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if spins.is_multiple_of(SPINS_PER_YIELD) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// A mutex's guard; a panic elsewhere while it was held left whole values only.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// lc0's default number of task workers for `threads` search threads on `cores` hardware
/// threads: none where the backend computes on the CPU (it uses the cores itself), else for
/// each search thread `cores / max(threads − 1, 1) − 1`, at most 4. Where that quotient is 0
/// (fewer cores than search threads less one), lc0's unsigned arithmetic wraps round to 4;
/// here it gives none.
pub(super) fn default_count(threads: usize, cores: usize, runs_on_cpu: bool) -> usize {
    if runs_on_cpu {
        return 0;
    }
    let working = threads.saturating_sub(1).max(1);
    let per_thread = (cores / working)
        .saturating_sub(1)
        .min(MAX_PER_SEARCH_THREAD);
    per_thread * threads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_follows_lc0s_rule() {
        // Two search threads on 16 or 32 cores: 4 each.
        assert_eq!(default_count(2, 16, false), 8);
        assert_eq!(default_count(2, 32, false), 8);
        // Three on 8 cores: 8 / 2 − 1 = 3 each.
        assert_eq!(default_count(3, 8, false), 9);
        // One search thread on 2 cores: 2 / 1 − 1 = 1.
        assert_eq!(default_count(1, 2, false), 1);
        // One core leaves none; a CPU backend gets none.
        assert_eq!(default_count(2, 1, false), 0);
        assert_eq!(default_count(2, 32, true), 0);
    }

    #[test]
    fn a_map_keeps_the_items_order_with_or_without_workers() {
        let items: Vec<u32> = (0..1000).collect();
        let expected: Vec<u64> = items.iter().map(|&i| u64::from(i) * 3).collect();
        for count in [0, 1, 3] {
            let workers = TaskWorkers::new(count);
            std::thread::scope(|scope| {
                workers
                    .run(scope, || {
                        for chunks in [Chunks::Even, Chunks::EachItem] {
                            for len in [0, 1, 2, 5, 31, 32, 33, 100, 1000] {
                                let got = workers.map(
                                    items[..len].to_vec(),
                                    chunks,
                                    || 3u64,
                                    |k, i| u64::from(i) * *k,
                                );
                                assert_eq!(got, expected[..len], "{count}, {len}, {chunks:?}");
                            }
                        }
                    })
                    .unwrap();
            });
        }
    }

    #[test]
    fn a_panic_in_a_chunk_reaches_the_caller_instead_of_hanging_it() {
        let workers = TaskWorkers::new(2);
        std::thread::scope(|scope| {
            workers
                .run(scope, || {
                    for round in 0..20u32 {
                        let mapped = catch_unwind(AssertUnwindSafe(|| {
                            workers.map(
                                (0..64u32).collect(),
                                Chunks::EachItem,
                                || (),
                                move |(), i| {
                                    assert!(i != round * 3, "item {i} fails");
                                    i
                                },
                            )
                        }));
                        assert!(mapped.is_err(), "round {round}: the panic was lost");
                    }
                    // The workers still map afterwards.
                    let got = workers.map((0..64u32).collect(), Chunks::EachItem, || (), |(), i| i);
                    assert_eq!(got, (0..64).collect::<Vec<u32>>());
                })
                .unwrap();
        });
    }

    #[test]
    fn several_threads_map_at_once() {
        let workers = TaskWorkers::new(2);
        std::thread::scope(|scope| {
            workers
                .run(scope, || {
                    std::thread::scope(|callers| {
                        for caller in 0..3u64 {
                            let workers = &workers;
                            callers.spawn(move || {
                                for round in 0..200u64 {
                                    let items: Vec<u64> = (0..64).collect();
                                    let got = workers.map(
                                        items,
                                        Chunks::Even,
                                        || (),
                                        move |(), i| i + caller * 1000 + round,
                                    );
                                    let want: Vec<u64> =
                                        (0..64).map(|i| i + caller * 1000 + round).collect();
                                    assert_eq!(got, want);
                                }
                            });
                        }
                    });
                })
                .unwrap();
        });
    }

    #[test]
    fn the_workers_take_chunks_the_caller_has_not_claimed() {
        // The caller's first item waits until another thread has run one: only a worker can
        // (the caller runs its chunks in turn), so the map ends only if a worker took a chunk.
        let ran_elsewhere = AtomicUsize::new(0);
        let workers = TaskWorkers::new(2);
        std::thread::scope(|scope| {
            workers
                .run(scope, || {
                    let me = std::thread::current().id();
                    let ran_elsewhere = &ran_elsewhere;
                    let got = workers.map(
                        (0..64u32).collect(),
                        Chunks::Even,
                        || (),
                        move |(), i| {
                            if std::thread::current().id() != me {
                                ran_elsewhere.fetch_add(1, Ordering::AcqRel);
                            } else if i == 0 {
                                let start = std::time::Instant::now();
                                while ran_elsewhere.load(Ordering::Acquire) == 0
                                    && start.elapsed() < Duration::from_secs(20)
                                {
                                    std::thread::yield_now();
                                }
                            }
                            i * 2
                        },
                    );
                    assert_eq!(got, (0..64).map(|i| i * 2).collect::<Vec<u32>>());
                })
                .unwrap();
        });
        assert!(
            ran_elsewhere.load(Ordering::Acquire) > 0,
            "no worker ran a chunk"
        );
    }
}
