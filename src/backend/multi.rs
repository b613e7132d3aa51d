//! One backend over several GPUs: a backend per GPU (each with the network's weights, its own
//! lanes and graphs), and a [`SharePolicy`] that says how calls are shared among them. Any
//! number of GPUs, of one vendor, alike or not: a split batch is shared by measured speed, so
//! a slower GPU gets a smaller part. A GPU that fails makes the call fail with its error
//! (which names the GPU); no call returns part of its outputs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::ops::Range;

use super::gpus::SharePolicy;
use super::{
    Backend, BackendAttributes, BackendError, BatchOutput, PickedOutput, PolicyPicks, ProfileReport,
};
use crate::chess::InputPlanes;
use crate::weights::format::InputFormat;

/// How far one split's timing may move a GPU's share: the square root of how much longer or
/// shorter its part took than the split's mean, within these bounds, so that the shares
/// settle where the parts finish together without chasing one noisy timing.
const BALANCE_STEP: (f64, f64) = (0.8, 1.25);

/// No GPU's share of a split falls below this fraction of its even share, so that a GPU that
/// was slow once (a first call's one-time work) is still timed again.
const SMALLEST_SHARE: f64 = 0.05;

/// One GPU's evaluation of some of a call's positions (rows of its batch).
type Eval<'e, O> = dyn Fn(&dyn Backend, Range<usize>) -> Result<O, BackendError> + Sync + 'e;

/// One GPU's backend and what it has done.
struct Member {
    /// The GPU's ordinal on the machine.
    ordinal: usize,
    backend: Box<dyn Backend>,
    in_flight: AtomicUsize,
    usage: Mutex<Usage>,
}

/// What a GPU has done since creation or the last profile reset.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    calls: u64,
    positions: u64,
    busy: Duration,
}

/// A part of a split batch: which GPU evaluates which positions.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    member: usize,
    rows: std::ops::Range<usize>,
}

/// One backend over the GPUs of `members`.
pub struct MultiGpu {
    name: String,
    members: Vec<Member>,
    policy: SharePolicy,
    /// The largest batch every GPU takes.
    max_batch: usize,
    /// Where the next choice among equally loaded GPUs starts.
    turn: AtomicUsize,
    /// Each GPU's weight in a split (relative; at first its recommended batch, which follows
    /// its multiprocessors), moved after each split toward equal finishing times.
    weights: Mutex<Vec<f64>>,
}

impl MultiGpu {
    /// A backend called `name` over `members`: (GPU ordinal, that GPU's backend), at least two.
    pub fn new(name: &str, members: Vec<(usize, Box<dyn Backend>)>, policy: SharePolicy) -> Self {
        assert!(
            members.len() >= 2,
            "a multi-GPU backend needs two GPUs or more"
        );
        let max_batch = members
            .iter()
            .map(|(_, backend)| backend.attributes().max_batch)
            .min()
            .unwrap_or(0);
        let weights = members
            .iter()
            .map(|(_, backend)| backend.attributes().recommended_batch.max(1) as f64)
            .collect();
        Self {
            name: name.to_owned(),
            members: members
                .into_iter()
                .map(|(ordinal, backend)| Member {
                    ordinal,
                    backend,
                    in_flight: AtomicUsize::new(0),
                    usage: Mutex::default(),
                })
                .collect(),
            policy,
            max_batch,
            turn: AtomicUsize::new(0),
            weights: Mutex::new(weights),
        }
    }

    /// The GPUs by load: fewest calls in flight first, equals in turn from a start that moves
    /// with every call.
    fn by_load(&self) -> Vec<usize> {
        let n = self.members.len();
        let start = self.turn.fetch_add(1, Ordering::Relaxed) % n;
        let mut order: Vec<usize> = (0..n).map(|i| (start + i) % n).collect();
        order.sort_by_key(|&i| self.members[i].in_flight.load(Ordering::Relaxed));
        order
    }

    /// Runs `eval` of the batch's positions `rows` on member `member`, counting it in flight
    /// and in the GPU's usage.
    fn run_on<O>(
        &self,
        member: usize,
        rows: Range<usize>,
        eval: &Eval<'_, O>,
    ) -> Result<(O, Duration), BackendError> {
        let gpu = &self.members[member];
        gpu.in_flight.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        let positions = rows.len() as u64;
        let result = eval(gpu.backend.as_ref(), rows);
        let took = start.elapsed();
        gpu.in_flight.fetch_sub(1, Ordering::Relaxed);
        let mut usage = gpu.usage.lock().unwrap_or_else(|e| e.into_inner());
        usage.calls += 1;
        usage.positions += positions;
        usage.busy += took;
        result.map(|out| (out, took))
    }

    /// Shares a call over `n` positions among the GPUs by the policy: `eval` runs a part,
    /// `join` appends a part's outputs to those before it.
    fn share<O: Send>(
        &self,
        n: usize,
        eval: &Eval<'_, O>,
        join: fn(&mut O, O),
    ) -> Result<O, BackendError> {
        let whole = |member| self.run_on(member, 0..n, eval).map(|(out, _)| out);
        match self.policy {
            SharePolicy::RoundRobin => whole(self.by_load()[0]),
            SharePolicy::Split { min_rows } => {
                let parts = self.split(n, min_rows);
                match parts.as_slice() {
                    [one] => whole(one.member),
                    _ => self.run_split(&parts, eval, join),
                }
            }
        }
    }

    /// The parts of an `n`-position batch under `Split`: as many GPUs as parts of at least
    /// `min_rows` allow (the least loaded), each part in proportion to its GPU's weight.
    fn split(&self, n: usize, min_rows: usize) -> Vec<Part> {
        let chosen: Vec<usize> = self
            .by_load()
            .into_iter()
            .take((n / min_rows).clamp(1, self.members.len()))
            .collect();
        let weights = self.weights.lock().unwrap_or_else(|e| e.into_inner());
        let sizes = proportional_sizes(n, &chosen.iter().map(|&i| weights[i]).collect::<Vec<_>>());
        let mut start = 0;
        chosen
            .into_iter()
            .zip(sizes)
            .filter(|&(_, size)| size > 0)
            .map(|(member, size)| {
                start += size;
                Part {
                    member,
                    rows: start - size..start,
                }
            })
            .collect()
    }

    /// Runs the parts at once (the first on this thread), joined in the batch's order.
    fn run_split<O: Send>(
        &self,
        parts: &[Part],
        eval: &Eval<'_, O>,
        join: fn(&mut O, O),
    ) -> Result<O, BackendError> {
        let results: Vec<_> = std::thread::scope(|scope| {
            let others: Vec<_> = parts[1..]
                .iter()
                .map(|part| scope.spawn(|| self.run_on(part.member, part.rows.clone(), eval)))
                .collect();
            let first = self.run_on(parts[0].member, parts[0].rows.clone(), eval);
            std::iter::once(first)
                .chain(others.into_iter().map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                }))
                .collect()
        });
        let mut joined: Option<O> = None;
        let mut times = Vec::with_capacity(parts.len());
        for result in results {
            let (part, took) = result?;
            match &mut joined {
                None => joined = Some(part),
                Some(out) => join(out, part),
            }
            times.push(took);
        }
        self.balance(parts, &times);
        Ok(joined.expect("a split has two parts or more"))
    }

    /// Moves the weights of a split's GPUs toward equal finishing times.
    fn balance(&self, parts: &[Part], times: &[Duration]) {
        let SharePolicy::Split { min_rows } = self.policy else {
            return;
        };
        if parts.len() < 2 || parts.iter().any(|p| p.rows.len() < min_rows) {
            return;
        }
        let mut weights = self.weights.lock().unwrap_or_else(|e| e.into_inner());
        let seconds: Vec<f64> = times.iter().map(|t| t.as_secs_f64().max(1e-9)).collect();
        rebalance(&mut weights, parts, &seconds);
    }
}

/// Divides `n` positions in proportion to `weights` (largest remainders; the sizes sum to `n`).
fn proportional_sizes(n: usize, weights: &[f64]) -> Vec<usize> {
    let total: f64 = weights.iter().sum();
    let exact: Vec<f64> = weights.iter().map(|w| n as f64 * w / total).collect();
    let mut sizes: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    by_remainder.sort_by(|&a, &b| {
        let remainder = |i: usize| exact[i] - sizes[i] as f64;
        remainder(b).total_cmp(&remainder(a)).then(a.cmp(&b))
    });
    let short = n - sizes.iter().sum::<usize>();
    for &i in by_remainder.iter().take(short) {
        sizes[i] += 1;
    }
    sizes
}

/// Scales each part's GPU weight by √(mean time / its time), within [`BALANCE_STEP`], keeping
/// the parts' GPUs' total weight, then raises any weight below [`SMALLEST_SHARE`] of the even
/// share to it.
fn rebalance(weights: &mut [f64], parts: &[Part], seconds: &[f64]) {
    let mean = seconds.iter().sum::<f64>() / seconds.len() as f64;
    let before: f64 = parts.iter().map(|p| weights[p.member]).sum();
    for (part, &took) in parts.iter().zip(seconds) {
        let step = (mean / took).sqrt().clamp(BALANCE_STEP.0, BALANCE_STEP.1);
        weights[part.member] *= step;
    }
    let after: f64 = parts.iter().map(|p| weights[p.member]).sum();
    let floor = SMALLEST_SHARE * before / parts.len() as f64;
    for part in parts {
        weights[part.member] = (weights[part.member] * before / after).max(floor);
    }
}

impl Backend for MultiGpu {
    fn name(&self) -> &str {
        &self.name
    }

    fn attributes(&self) -> BackendAttributes {
        let each: Vec<_> = self
            .members
            .iter()
            .map(|m| m.backend.attributes())
            .collect();
        let first = each[0];
        let (recommended_batch, recommended_threads) = match self.policy {
            // One call keeps every GPU busy.
            SharePolicy::Split { .. } => (
                each.iter().map(|a| a.recommended_batch).sum(),
                first.recommended_threads,
            ),
            // Each GPU needs its own callers.
            SharePolicy::RoundRobin => (
                first.recommended_batch,
                each.iter().map(|a| a.recommended_threads).sum(),
            ),
        };
        BackendAttributes {
            max_batch: self.max_batch,
            recommended_batch,
            recommended_threads,
            ..first
        }
    }

    fn input_format(&self) -> InputFormat {
        self.members[0].backend.input_format()
    }

    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        BackendError::check_batch_size(&self.name, batch.len(), self.max_batch)?;
        if batch.is_empty() {
            return Ok(BatchOutput::default());
        }
        let eval = |backend: &dyn Backend, rows: Range<usize>| backend.evaluate(&batch[rows]);
        self.share(batch.len(), &eval, BatchOutput::extend)
    }

    fn evaluate_picked(
        &self,
        batch: &[InputPlanes],
        picks: &PolicyPicks,
    ) -> Result<PickedOutput, BackendError> {
        BackendError::check_picked(&self.name, batch.len(), self.max_batch, picks.len())?;
        if batch.is_empty() {
            return Ok(PickedOutput::default());
        }
        let eval = |backend: &dyn Backend, rows: Range<usize>| {
            if rows.len() == batch.len() {
                backend.evaluate_picked(batch, picks)
            } else {
                backend.evaluate_picked(&batch[rows.clone()], &picks.rows(rows))
            }
        };
        self.share(batch.len(), &eval, PickedOutput::extend)
    }

    fn profile_reports(&self) -> Vec<ProfileReport> {
        self.members
            .iter()
            .flat_map(|m| m.backend.profile_reports())
            .collect()
    }

    fn memory_report(&self) -> Option<String> {
        let lines: Vec<String> = self
            .members
            .iter()
            .filter_map(|m| Some(format!("GPU {}: {}", m.ordinal, m.backend.memory_report()?)))
            .collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    fn usage_report(&self) -> Option<String> {
        let usage: Vec<Usage> = self
            .members
            .iter()
            .map(|m| *m.usage.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let positions: u64 = usage.iter().map(|u| u.positions).sum();
        let weights = self.weights.lock().unwrap_or_else(|e| e.into_inner());
        let total_weight: f64 = weights.iter().sum();
        let lines: Vec<String> = self
            .members
            .iter()
            .zip(&usage)
            .zip(weights.iter())
            .map(|((m, u), w)| {
                let busy = u.busy.as_secs_f64();
                format!(
                    "GPU {}: {:.1}% of the positions ({} in {} calls), {:.0} positions/s while busy{}",
                    m.ordinal,
                    100.0 * u.positions as f64 / positions.max(1) as f64,
                    u.positions,
                    u.calls,
                    if busy > 0.0 { u.positions as f64 / busy } else { 0.0 },
                    match self.policy {
                        SharePolicy::Split { .. } =>
                            format!(", split share {:.1}%", 100.0 * w / total_weight),
                        SharePolicy::RoundRobin => String::new(),
                    }
                )
            })
            .collect();
        Some(lines.join("\n"))
    }

    fn reset_profile(&self) {
        for member in &self.members {
            member.backend.reset_profile();
            *member.usage.lock().unwrap_or_else(|e| e.into_inner()) = Usage::default();
        }
    }

    fn prepare(&self, max_batch: usize, callers: usize) -> Result<(), BackendError> {
        // Under `RoundRobin` each GPU meets its share of the callers; a split part may have
        // any size up to the whole batch, and every caller's parts reach every GPU.
        let callers_each = match self.policy {
            SharePolicy::Split { .. } => callers,
            SharePolicy::RoundRobin => callers.div_ceil(self.members.len()),
        };
        let results: Vec<Result<(), BackendError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .members
                .iter()
                .map(|m| scope.spawn(move || m.backend.prepare(max_batch, callers_each.max(1))))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        results.into_iter().collect()
    }

    fn layer_outputs(&self, batch: &[InputPlanes]) -> Result<Option<Vec<Vec<f32>>>, BackendError> {
        self.members[self.by_load()[0]].backend.layer_outputs(batch)
    }
}

#[cfg(test)]
#[path = "multi_tests.rs"]
mod tests;
