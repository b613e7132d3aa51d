//! `cpu`: the f32 reference backend and numerical oracle, multi-threaded with rayon.

mod forward;
mod math;
mod residual;

use std::sync::Mutex;

use super::{Backend, BackendAttributes, BackendError, BackendOptions, BatchOutput, ProfileReport};
use crate::chess::InputPlanes;
use crate::profile::PassProfile;
use crate::weights::Model;
use crate::weights::format::InputFormat;

const NAME: &str = "cpu";
/// lc0's maximum batch size.
const DEFAULT_MAX_BATCH: usize = 1024;

/// The CPU backend. Options: `threads` (default: all cores), `max_batch` (1024),
/// `policy_head` ("vanilla"), `value_head` ("winner"), `mlh` (true), `profile` (false: time
/// every operation with the host clock).
pub struct CpuBackend {
    network: Model,
    pool: rayon::ThreadPool,
    max_batch: usize,
    moves_left: bool,
    /// The profiled passes, when profiling.
    profile: Option<Mutex<Vec<PassProfile>>>,
}

impl CpuBackend {
    pub fn new(network: impl Into<Model>, options: &BackendOptions) -> Result<Self, BackendError> {
        let mut network = network.into();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = options.get::<usize>(NAME, "threads")?.unwrap_or(cores);
        let max_batch = options
            .get::<usize>(NAME, "max_batch")?
            .unwrap_or(DEFAULT_MAX_BATCH);
        for (key, value) in [("threads", threads), ("max_batch", max_batch)] {
            if value == 0 {
                return Err(BackendError::BadOption {
                    backend: NAME.to_owned(),
                    key: key.to_owned(),
                    value: "0".to_owned(),
                    reason: "must be at least 1".to_owned(),
                });
            }
        }
        let has_moves_left = match &mut network {
            Model::Attention(n) => {
                options.select_heads(NAME, n)?;
                n.moves_left.is_some()
            }
            Model::Residual(n) => {
                options.check_tower_heads(NAME)?;
                n.moves_left.is_some()
            }
        };
        let moves_left = options.get::<bool>(NAME, "mlh")?.unwrap_or(true) && has_moves_left;
        let profile = options
            .get::<bool>(NAME, "profile")?
            .unwrap_or(false)
            .then(Mutex::default);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("lc0rs-cpu-{i}"))
            .build()
            .map_err(|e| BackendError::BadOption {
                backend: NAME.to_owned(),
                key: "threads".to_owned(),
                value: threads.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Self {
            network,
            pool,
            max_batch,
            moves_left,
            profile,
        })
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &str {
        NAME
    }

    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            has_wdl: self.network.format().wdl,
            has_mlh: self.moves_left,
            runs_on_cpu: true,
            max_batch: self.max_batch,
            recommended_batch: 8,
            recommended_threads: 1,
        }
    }

    fn input_format(&self) -> InputFormat {
        self.network.format().input
    }

    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        BackendError::check_batch_size(NAME, batch.len(), self.max_batch)?;
        if batch.is_empty() {
            return Ok(BatchOutput::default());
        }
        let mut ops = forward::OpRecorder::new(batch.len(), self.profile.is_some());
        let out = self.pool.install(|| match &self.network {
            Model::Attention(network) => {
                forward::forward(network, batch, self.moves_left, &mut ops)
            }
            Model::Residual(tower) => residual::forward(tower, batch, self.moves_left, &mut ops),
        });
        if let (Some(passes), Some(pass)) = (&self.profile, ops.finish()) {
            passes.lock().unwrap_or_else(|e| e.into_inner()).push(pass);
        }
        out.map_err(|error| BackendError::NonFinite {
            backend: NAME.to_owned(),
            error,
        })
    }

    fn profile_reports(&self) -> Vec<ProfileReport> {
        let Some(passes) = self.profile.as_ref() else {
            return Vec::new();
        };
        vec![ProfileReport {
            device: format!("cpu ({} threads)", self.pool.current_num_threads()),
            gpu: None,
            passes: passes.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            plans: Vec::new(),
        }]
    }

    fn reset_profile(&self) {
        if let Some(passes) = &self.profile {
            passes.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    fn layer_outputs(&self, batch: &[InputPlanes]) -> Result<Option<Vec<Vec<f32>>>, BackendError> {
        Ok(match &self.network {
            Model::Attention(network) => Some(
                self.pool
                    .install(|| forward::residual_streams(network, batch)),
            ),
            Model::Residual(_) => None,
        })
    }
}
