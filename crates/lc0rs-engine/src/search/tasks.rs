//! The search's task workers (lc0's TaskWorkers): the threads that prepare a large pass's
//! leaves and turn a batch's policies into children for the search threads, which wait for
//! them meanwhile (lc0's search thread takes a share itself). They are a pool of the search's
//! own, sized as lc0 sizes its task workers, not the process's global pool of a thread per
//! core: an idle pool thread spins for a while before it sleeps, and with a thread per core
//! that spinning takes the cores (or, on a CPU with two hardware threads a core, the core's
//! other half) from the search threads themselves, and from any other engine on the host.

use rayon::prelude::*;

/// Items per task; fewer than twice this are mapped on the calling thread, where waking the
/// workers would cost more than it saves.
const ITEMS_PER_TASK: usize = 16;

/// lc0's ceiling on the task workers of one search thread.
const MAX_PER_SEARCH_THREAD: usize = 4;

/// A pool of task workers, or none (everything on the calling thread).
pub(super) struct TaskWorkers {
    pool: Option<rayon::ThreadPool>,
}

/// The task workers could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {count} task worker threads: {source}")]
pub struct TaskWorkersError {
    count: usize,
    source: rayon::ThreadPoolBuildError,
}

impl TaskWorkers {
    /// No workers: everything on the calling thread.
    pub fn none() -> Self {
        Self { pool: None }
    }

    /// Starts `count` workers (none where `count` is 0).
    pub fn new(count: usize) -> Result<Self, TaskWorkersError> {
        if count == 0 {
            return Ok(Self::none());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(count)
            .thread_name(|i| format!("lc0rs-task-{i}"))
            .build()
            .map_err(|source| TaskWorkersError { count, source })?;
        Ok(Self { pool: Some(pool) })
    }

    /// The worker threads.
    pub fn count(&self) -> usize {
        self.pool
            .as_ref()
            .map_or(0, rayon::ThreadPool::current_num_threads)
    }

    /// Maps `items` in their order with a per-task state made by `init`: on the workers in
    /// tasks of at least [`ITEMS_PER_TASK`] items, or on this thread where there are few (or
    /// no workers).
    pub fn map<T: Send, S, R: Send>(
        &self,
        items: Vec<T>,
        init: impl Fn() -> S + Sync + Send,
        f: impl Fn(&mut S, T) -> R + Sync + Send,
    ) -> Vec<R> {
        match &self.pool {
            Some(pool) if items.len() >= 2 * ITEMS_PER_TASK => pool.install(|| {
                items
                    .into_par_iter()
                    .with_min_len(ITEMS_PER_TASK)
                    .map_init(init, f)
                    .collect()
            }),
            _ => {
                let mut state = init();
                items.into_iter().map(|item| f(&mut state, item)).collect()
            }
        }
    }
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
            let workers = TaskWorkers::new(count).unwrap();
            assert_eq!(workers.count(), count);
            let got = workers.map(items.clone(), || 3u64, |k, i| u64::from(i) * *k);
            assert_eq!(got, expected, "{count} workers");
            // Few items are mapped on the calling thread.
            assert_eq!(workers.map(vec![5u32], || (), |(), i| i + 1), [6]);
        }
    }
}
