//! The backend API, in the spirit of lc0's: a backend evaluates a batch of encoded positions
//! to value (Q = W − L, D), moves left (M) and the 1858 raw policy logits. Backends are made by
//! name with lc0-style options (`-b cpu -o threads=2,max_batch=256`).

pub mod bench;
pub mod cpu;
pub mod executor;
pub mod finite;
pub mod gpus;
mod multi;
mod options;
pub mod oracle;
mod picked;
pub mod random;
mod registry;

use shakmaty::Move;

pub use multi::MultiGpu;
pub use options::BackendOptions;
pub use picked::{PickedOutput, PolicyPicks, softmax};
pub use registry::{BACKEND_NAMES, best_backend_name, create_backend};

use crate::board::POLICY_SIZE;
use crate::chess::InputPlanes;
use crate::weights::WeightsError;
use crate::weights::format::InputFormat;

/// lc0's default policy softmax temperature (`--policy-softmax-temp`).
pub const DEFAULT_POLICY_TEMPERATURE: f32 = 1.359;

/// Why a backend could not be made or could not evaluate.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("unknown backend {name:?}; available: {available}")]
    UnknownBackend { name: String, available: String },
    #[error("backend {backend}: unknown option {key:?}; it takes: {known}")]
    UnknownOption {
        backend: String,
        key: String,
        known: String,
    },
    #[error("backend {backend}: option {key}={value:?}: {reason}")]
    BadOption {
        backend: String,
        key: String,
        value: String,
        reason: String,
    },
    #[error("backend options {text:?}: {reason}")]
    OptionSyntax { text: String, reason: String },
    #[error("backend {backend}: a batch of {size} positions exceeds its maximum of {max}")]
    BatchTooLarge {
        backend: String,
        size: usize,
        max: usize,
    },
    #[error("backend {backend}: {error}")]
    Network {
        backend: String,
        error: crate::weights::network::UnknownHead,
    },
    #[error("backend {backend}: {error}")]
    Gpu {
        backend: String,
        error: crate::gpu::GpuError,
    },
    #[error("backend {backend}: {error}")]
    NonFinite {
        backend: String,
        error: finite::NonFinite,
    },
    #[error("backend {backend}: policy picks for {picks} positions given with a batch of {batch}")]
    PicksMismatch {
        backend: String,
        picks: usize,
        batch: usize,
    },
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

impl BackendError {
    /// A batch of `size` positions refused where it exceeds `max`, backend `backend`'s largest.
    pub fn check_batch_size(backend: &str, size: usize, max: usize) -> Result<(), Self> {
        if size > max {
            return Err(Self::BatchTooLarge {
                backend: backend.to_owned(),
                size,
                max,
            });
        }
        Ok(())
    }

    /// A call with policy picks refused where the batch exceeds `max` or the picks are not
    /// one list for each position of the batch.
    pub fn check_picked(backend: &str, batch: usize, max: usize, picks: usize) -> Result<(), Self> {
        Self::check_batch_size(backend, batch, max)?;
        if picks != batch {
            return Err(Self::PicksMismatch {
                backend: backend.to_owned(),
                picks,
                batch,
            });
        }
        Ok(())
    }
}

/// Profiled passes and the device they ran on.
#[derive(Debug, Clone)]
pub struct ProfileReport {
    pub device: String,
    /// The GPU's ordinal on the machine, for a GPU backend.
    pub gpu: Option<usize>,
    pub passes: Vec<crate::profile::PassProfile>,
    /// What ran at each batch size profiled, one line per size, where the backend plans its
    /// passes (the GPU backends: which kernel each operation runs on).
    pub plans: Vec<String>,
}

/// What a backend can do (lc0's `BackendAttributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackendAttributes {
    pub has_wdl: bool,
    pub has_mlh: bool,
    pub runs_on_cpu: bool,
    pub max_batch: usize,
    pub recommended_batch: usize,
    /// The search threads that keep it busy (lc0's default: one more than the backend's
    /// own): 1 on the CPU, whose backend already uses every core; 2 on a GPU, whose calls
    /// from two threads run side by side on its lanes; more over several GPUs dealt whole
    /// calls.
    pub recommended_threads: usize,
}

/// The outputs of a batch, position-major.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchOutput {
    /// W − L (or the tanh value of a non-WDL network).
    pub q: Vec<f32>,
    /// Draw probability (0 for a non-WDL network).
    pub d: Vec<f32>,
    /// Moves left in plies (0 without a moves-left head).
    pub m: Vec<f32>,
    /// `[batch][1858]` raw policy logits.
    pub policy: Vec<f32>,
}

impl BatchOutput {
    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// The raw policy logits of position `i`.
    pub fn policy_of(&self, i: usize) -> &[f32] {
        &self.policy[i * POLICY_SIZE..(i + 1) * POLICY_SIZE]
    }

    /// Win, draw and loss probabilities of position `i`.
    pub fn wdl_of(&self, i: usize) -> [f32; 3] {
        wdl(self.q[i], self.d[i])
    }

    /// Appends another part of the same batch (the next positions).
    pub fn extend(&mut self, part: Self) {
        self.q.extend(part.q);
        self.d.extend(part.d);
        self.m.extend(part.m);
        self.policy.extend(part.policy);
    }
}

/// Evaluates any number of positions, in passes of at most the backend's `max_batch` (for an
/// embedder, whose batches are its own). The first pass's outputs are kept as they are, so a
/// batch within `max_batch`, the usual case, is not copied again; later passes are appended.
pub fn evaluate_in_passes(
    backend: &dyn Backend,
    planes: &[InputPlanes],
) -> Result<BatchOutput, BackendError> {
    let max = backend.attributes().max_batch.max(1);
    let mut output: Option<BatchOutput> = None;
    for chunk in planes.chunks(max) {
        let part = backend.evaluate(chunk)?;
        match &mut output {
            None => output = Some(part),
            Some(all) => all.extend(part),
        }
    }
    Ok(output.unwrap_or_default())
}

/// [`evaluate_in_passes`] reading only the policy logits `picks` names (one list a position).
pub fn evaluate_picked_in_passes(
    backend: &dyn Backend,
    planes: &[InputPlanes],
    picks: &PolicyPicks,
) -> Result<PickedOutput, BackendError> {
    BackendError::check_picked(backend.name(), planes.len(), usize::MAX, picks.len())?;
    let max = backend.attributes().max_batch.max(1);
    let mut output: Option<PickedOutput> = None;
    for (pass, chunk) in planes.chunks(max).enumerate() {
        let start = pass * max;
        let part = if chunk.len() == planes.len() {
            backend.evaluate_picked(chunk, picks)?
        } else {
            backend.evaluate_picked(chunk, &picks.rows(start..start + chunk.len()))?
        };
        match &mut output {
            None => output = Some(part),
            Some(all) => all.extend(part),
        }
    }
    Ok(output.unwrap_or_default())
}

/// Win, draw and loss probabilities from Q = W − L and D.
pub fn wdl(q: f32, d: f32) -> [f32; 3] {
    [(1.0 - d + q) / 2.0, d, (1.0 - d - q) / 2.0]
}

/// A neural-network evaluator.
pub trait Backend: Send + Sync {
    /// The name it was created under (`cpu`, `cuda-fp16`, ...).
    fn name(&self) -> &str;
    fn attributes(&self) -> BackendAttributes;
    /// The input format positions must be encoded in for this network.
    fn input_format(&self) -> InputFormat;
    /// Evaluates a batch of at most `attributes().max_batch` positions.
    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError>;
    /// Evaluates a batch reading only the policy logits `picks` names (one list a position):
    /// what a search needs. The GPU backends copy just those out of their download buffer;
    /// this default evaluates in full and picks.
    fn evaluate_picked(
        &self,
        batch: &[InputPlanes],
        picks: &PolicyPicks,
    ) -> Result<PickedOutput, BackendError> {
        BackendError::check_picked(self.name(), batch.len(), usize::MAX, picks.len())?;
        Ok(PickedOutput::from_full(self.evaluate(batch)?, picks))
    }
    /// The profiled passes since creation (or the last reset), one report a GPU, if the
    /// backend was created with profiling on; none otherwise.
    fn profile_reports(&self) -> Vec<ProfileReport> {
        Vec::new()
    }
    /// The device memory in use, for GPU backends (a line a GPU).
    fn memory_report(&self) -> Option<String> {
        None
    }
    /// How the work was shared, for a backend over several GPUs (a line a GPU).
    fn usage_report(&self) -> Option<String> {
        None
    }
    /// Forgets the profile so far (backendbench calls it after its warm-up).
    fn reset_profile(&self) {}
    /// Does the one-time work (graph capture, GEMM algorithm choice) for every batch size of
    /// at most `max_batch` positions that `callers` threads calling at once can meet, so that
    /// no later call pays it. Nothing to do by default.
    fn prepare(&self, _max_batch: usize, _callers: usize) -> Result<(), BackendError> {
        Ok(())
    }
    /// The residual stream (`[batch·64][E]`) after the embedding and after each encoder layer,
    /// for `selftest --layers`; `None` where a backend cannot expose it.
    fn layer_outputs(&self, _batch: &[InputPlanes]) -> Result<Option<Vec<Vec<f32>>>, BackendError> {
        Ok(None)
    }
}

/// The probabilities of the legal moves: softmax of their logits at `temperature`, as lc0
/// computes them (max subtracted first). `legal` pairs each move with its policy index.
pub fn legal_move_probabilities(
    logits: &[f32],
    legal: &[(Move, usize)],
    temperature: f32,
) -> Vec<f32> {
    let logits: Vec<f32> = legal.iter().map(|&(_, i)| logits[i]).collect();
    softmax(&logits, temperature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shakmaty::{Chess, Position};

    #[test]
    fn softmax_hand_computed() {
        let pos = Chess::default();
        let legal: Vec<_> = pos
            .legal_moves()
            .into_iter()
            .take(3)
            .enumerate()
            .map(|(i, m)| (m, i))
            .collect();
        let logits = [0.0f32, 1.0, 2.0];
        let p = legal_move_probabilities(&logits, &legal, 1.0);
        let z = 1.0 + 1f32.exp() + 2f32.exp();
        for (got, want) in p.iter().zip([1.0 / z, 1f32.exp() / z, 2f32.exp() / z]) {
            assert!((got - want).abs() < 1e-6);
        }
        // Temperature 2 halves the logits.
        let p2 = legal_move_probabilities(&logits, &legal, 2.0);
        let z2 = 1.0 + 0.5f32.exp() + 1f32.exp();
        assert!((p2[2] - 1f32.exp() / z2).abs() < 1e-6);
    }

    #[test]
    fn wdl_from_q_and_d() {
        let out = BatchOutput {
            q: vec![0.2],
            d: vec![0.5],
            m: vec![0.0],
            policy: vec![0.0; POLICY_SIZE],
        };
        let [w, d, l] = out.wdl_of(0);
        assert!((w - 0.35).abs() < 1e-6 && (d - 0.5).abs() < 1e-6 && (l - 0.15).abs() < 1e-6);
    }
}
