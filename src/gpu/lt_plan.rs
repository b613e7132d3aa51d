//! What the Lt libraries (cuBLASLt, hipBLASLt) need from lc0rs, written once for every vendor:
//! the key a plan is cached under, the epilogues to ask for (most fused first, with what each
//! leaves to our kernel), the workspace and candidate counts, and the choice of the fastest of
//! the heuristic's candidates by timing them on the real buffers. The vendor folders hold only
//! the library calls (descriptors, layouts, heuristics, matmul).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::gemm::{ColumnMajorGemm, Fused, MatrixLayout};
use super::{Epilogue, GpuError, GpuResult, Linear};

/// The Lt workspace (NVIDIA's recommendation for Hopper; hipBLASLt's samples use the same).
pub const WORKSPACE_BYTES: usize = 32 << 20;
/// How many of the heuristic's candidates are timed.
pub const CANDIDATES: usize = 8;
/// Timed runs per candidate (after one warm-up run).
const TIMED_RUNS: usize = 3;

/// What a plan (descriptor, layouts, algorithm) is cached under: the column-major layouts of
/// the three matrices and the epilogue asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PlanKey {
    pub layouts: [MatrixLayout; 3],
    pub bias: bool,
    pub epilogue: Epilogue,
}

impl PlanKey {
    pub fn of(op: &Linear) -> Self {
        Self {
            layouts: ColumnMajorGemm::from(op).layouts(),
            bias: op.bias.is_some(),
            epilogue: op.epilogue,
        }
    }
}

/// The plan cached under `key`, made by `make` the first time.
pub fn cached<P>(
    plans: &mut HashMap<PlanKey, P>,
    key: PlanKey,
    make: impl FnOnce() -> GpuResult<P>,
) -> GpuResult<&P> {
    Ok(match plans.entry(key) {
        Entry::Occupied(plan) => plan.into_mut(),
        Entry::Vacant(slot) => slot.insert(make()?),
    })
}

/// The first plan `plan_for(epilogue, fused)` can make, walking the epilogue choices from the
/// most fused down (`None` from `plan_for`: the library has no algorithm for that epilogue).
/// An error names the GEMM when no epilogue has one.
pub fn first_plan<P>(
    library: &str,
    op: &Linear,
    swish: bool,
    mut plan_for: impl FnMut(LtEpilogue, Fused) -> GpuResult<Option<P>>,
) -> GpuResult<P> {
    for (epilogue, fused) in epilogue_choices(op.bias.is_some(), op.epilogue, swish) {
        if let Some(plan) = plan_for(epilogue, fused)? {
            return Ok(plan);
        }
        tracing::debug!(
            ?epilogue,
            m = op.m,
            n = op.n,
            k = op.k,
            "{library} has no algorithm for this epilogue; trying a plainer one"
        );
    }
    Err(GpuError::Unsupported(format!(
        "{library} has no algorithm for a {}×{}×{} fp16 GEMM on this GPU; use gemm=blas",
        op.m, op.n, op.k
    )))
}

/// The Lt epilogues lc0rs asks for, by meaning; each vendor maps them to its library's codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LtEpilogue {
    Default,
    Relu,
    Bias,
    ReluBias,
    /// SiLU (hipBLASLt 1.0+ only; cuBLASLt has none).
    Swish,
    /// Bias then SiLU (hipBLASLt 1.0+ only).
    SwishBias,
}

/// The epilogues to try for a layer, most fused first, with what each leaves to the kernel.
/// `swish`: whether the library has the SiLU epilogues.
pub fn epilogue_choices(bias: bool, epilogue: Epilogue, swish: bool) -> Vec<(LtEpilogue, Fused)> {
    let complete = match (epilogue, bias) {
        (Epilogue::None, true) => Some(LtEpilogue::Bias),
        (Epilogue::None, false) => Some(LtEpilogue::Default),
        (Epilogue::Relu, true) => Some(LtEpilogue::ReluBias),
        (Epilogue::Relu, false) => Some(LtEpilogue::Relu),
        (Epilogue::Silu, true) => swish.then_some(LtEpilogue::SwishBias),
        (Epilogue::Silu, false) => swish.then_some(LtEpilogue::Swish),
    };
    let mut choices: Vec<(LtEpilogue, Fused)> = complete
        .map(|e| (e, Fused::Everything))
        .into_iter()
        .collect();
    if bias && complete != Some(LtEpilogue::Bias) {
        choices.push((LtEpilogue::Bias, Fused::Bias));
    }
    if complete != Some(LtEpilogue::Default) {
        choices.push((LtEpilogue::Default, Fused::Nothing));
    }
    choices
}

/// A clock on the device's stream: marks recorded between enqueued work, and the time between
/// two of them once both have passed.
pub trait Stopwatch {
    type Mark;
    fn mark(&self) -> GpuResult<Self::Mark>;
    fn elapsed_ms(&self, start: &Self::Mark, end: &Self::Mark) -> GpuResult<f32>;
    /// Enqueues what makes the next run read its operands from memory, not from the cache, as
    /// in a pass, where each layer's weights come from DRAM once they exceed the last-level
    /// cache (run back to back, a small GEMM would be timed with its weights cached). Where a
    /// device has nothing for it, nothing.
    fn evict_cache(&self) -> GpuResult<()> {
        Ok(())
    }
}

/// One GEMM shape's plan: the library's descriptor, the layouts of W, X and Y, the algorithm,
/// and how much of the epilogue the library does.
pub struct Plan<Desc, Layout, Algo> {
    pub desc: Desc,
    pub layouts: [Layout; 3],
    pub algo: Algo,
    pub fused: Fused,
}

/// The plan for a descriptor and layouts, given the heuristic's `candidates`; `None` when it
/// offered none. `run(desc, layouts, algo)` runs the GEMM once (for timing). Without
/// `time_candidates` (the stream captures a graph, where timing would enqueue into the graph,
/// or `gemm_timing=false` was asked for) the heuristic's first candidate is taken.
pub fn plan_with<D, L, A: Copy, S: Stopwatch>(
    (desc, layouts, fused): (D, [L; 3], Fused),
    candidates: &[A],
    time_candidates: bool,
    clock: &S,
    mut run: impl FnMut(&D, &[L; 3], A) -> GpuResult<()>,
) -> GpuResult<Option<Plan<D, L, A>>> {
    let chosen = choose(candidates, time_candidates, clock, |algo| {
        run(&desc, &layouts, algo)
    })?;
    Ok(chosen.map(|algo| Plan {
        desc,
        layouts,
        algo,
        fused,
    }))
}

/// The algorithm a plan runs with: `None` when the heuristic offered none, the first when
/// candidates are not to be timed, else the fastest.
fn choose<A: Copy, S: Stopwatch>(
    candidates: &[A],
    time_candidates: bool,
    clock: &S,
    run: impl FnMut(A) -> GpuResult<()>,
) -> GpuResult<Option<A>> {
    match candidates.first() {
        None => Ok(None),
        Some(&first) if !time_candidates => Ok(Some(first)),
        Some(_) => fastest(candidates, clock, run).map(Some),
    }
}

/// Times each candidate with `run` (one warm-up run, skipped if it fails, then
/// [`TIMED_RUNS`] timed ones, each after the cache is evicted and timed alone) and returns the
/// fastest; a lone candidate is returned untimed.
fn fastest<A: Copy, S: Stopwatch>(
    candidates: &[A],
    clock: &S,
    mut run: impl FnMut(A) -> GpuResult<()>,
) -> GpuResult<A> {
    let Some(&first) = candidates.first() else {
        return Err(GpuError::Unsupported(
            "the Lt heuristic offered no algorithm to time".to_owned(),
        ));
    };
    if candidates.len() == 1 {
        return Ok(first);
    }
    let mut best = (f32::INFINITY, first);
    for &candidate in candidates {
        if run(candidate).is_err() {
            continue;
        }
        let mut ms = 0.0;
        for _ in 0..TIMED_RUNS {
            clock.evict_cache()?;
            let start = clock.mark()?;
            run(candidate)?;
            let end = clock.mark()?;
            ms += clock.elapsed_ms(&start, &end)?;
        }
        if ms < best.0 {
            best = (ms, candidate);
        }
    }
    Ok(best.1)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn epilogues_are_tried_from_most_fused_to_plain() {
        use Epilogue::*;
        let (bias, plain) = (
            (LtEpilogue::Bias, Fused::Bias),
            (LtEpilogue::Default, Fused::Nothing),
        );
        assert_eq!(
            epilogue_choices(true, Silu, true),
            [(LtEpilogue::SwishBias, Fused::Everything), bias, plain]
        );
        // Without a SiLU epilogue: bias in the GEMM, SiLU by kernel.
        assert_eq!(epilogue_choices(true, Silu, false), [bias, plain]);
        assert_eq!(
            epilogue_choices(false, Silu, true),
            [(LtEpilogue::Swish, Fused::Everything), plain]
        );
        assert_eq!(epilogue_choices(false, Silu, false), [plain]);
        assert_eq!(
            epilogue_choices(false, Relu, false),
            [(LtEpilogue::Relu, Fused::Everything), plain]
        );
        assert_eq!(
            epilogue_choices(true, Relu, false),
            [(LtEpilogue::ReluBias, Fused::Everything), bias, plain]
        );
        assert_eq!(
            epilogue_choices(true, None, true),
            [(LtEpilogue::Bias, Fused::Everything), plain]
        );
        assert_eq!(
            epilogue_choices(false, None, true),
            [(LtEpilogue::Default, Fused::Everything)]
        );
    }

    /// A clock that advances by the cost of each candidate run since the last mark. The
    /// evictions before candidate 1's timed runs (the 4th to 6th) cost 100 ms each: counted in
    /// its time, they would make candidate 2 the fastest.
    struct FakeClock {
        now: Cell<f32>,
        evictions: Cell<usize>,
    }

    impl Stopwatch for FakeClock {
        type Mark = f32;
        fn mark(&self) -> GpuResult<f32> {
            Ok(self.now.get())
        }
        fn elapsed_ms(&self, start: &f32, end: &f32) -> GpuResult<f32> {
            Ok(end - start)
        }
        fn evict_cache(&self) -> GpuResult<()> {
            let n = self.evictions.get() + 1;
            self.evictions.set(n);
            if (TIMED_RUNS + 1..=2 * TIMED_RUNS).contains(&n) {
                self.now.set(self.now.get() + 100.0);
            }
            Ok(())
        }
    }

    #[test]
    fn the_fastest_candidate_wins_and_failing_ones_are_skipped() {
        let clock = FakeClock {
            now: Cell::new(0.0),
            evictions: Cell::new(0),
        };
        // Candidate i costs COST[i] ms a run; candidate 3 fails (its warm-up errs), although it
        // would be the cheapest.
        const COST: [f32; 4] = [5.0, 2.0, 3.0, 0.5];
        let mut runs = [0usize; 4];
        let best = fastest(&[0usize, 1, 2, 3], &clock, |c| {
            if c == 3 {
                return Err(GpuError::Unsupported("no kernel".to_owned()));
            }
            runs[c] += 1;
            clock.now.set(clock.now.get() + COST[c]);
            Ok(())
        })
        .unwrap();
        assert_eq!(best, 1);
        assert_eq!(runs, [1 + TIMED_RUNS, 1 + TIMED_RUNS, 1 + TIMED_RUNS, 0]);
        // Every timed run (not the warm-ups) follows an eviction.
        assert_eq!(clock.evictions.get(), 3 * TIMED_RUNS);
        assert!(fastest::<usize, _>(&[], &clock, |_| Ok(())).is_err());
        // Untimed (capturing, or gemm_timing=false), nothing runs: the heuristic's first
        // candidate is taken.
        let never = |_: usize| -> GpuResult<()> { unreachable!("no timing asked for") };
        assert_eq!(choose(&[2usize, 1], false, &clock, never).unwrap(), Some(2));
        assert_eq!(choose::<usize, _>(&[], true, &clock, never).unwrap(), None);
    }
}
