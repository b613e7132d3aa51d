//! The commands of the `lc0rs` binary, one function each: `main.rs` parses the arguments and
//! calls one of these. They print their results (stdout) and progress (stderr) as the command
//! line shows them; the pieces worth testing on their own are plain functions beside them.

pub mod attnbench;
pub mod backendbench;
pub mod compare;
pub mod devices;
pub mod eval;
pub mod info;
mod profile_report;
pub mod selftest;

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use lc0rs::backend::{self, Backend, BackendError};
use lc0rs::chess::ChessError;
use lc0rs::gpu::GpuError;
use lc0rs::netsource::NetSource;
use lc0rs::weights::{FileInfo, LoadOptions, Model, WeightsError};

pub use attnbench::{AttnBenchConfig, attnbench};
pub use backendbench::{ProfileOutputs, backendbench};
pub use compare::compare_option_sets;
pub use devices::{compile_kernels, devices, list_kernel_files};
pub use eval::eval;
pub use info::{gen_net, info};
pub use selftest::selftest;

/// Why a command failed. Each message names the flag, file or step at fault; the underlying
/// error stays attached as the source.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A flag value the parser accepts but the command cannot use.
    #[error("{0}")]
    Usage(String),
    #[error("loading {name}")]
    Load {
        name: String,
        #[source]
        source: WeightsError,
    },
    #[error(transparent)]
    Weights(#[from] WeightsError),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Chess(#[from] ChessError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("writing {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("drawing the chart for {}: {reason}", path.display())]
    Chart { path: PathBuf, reason: String },
    #[error("the backend recorded no profile")]
    NoProfile,
    #[error("no profiled passes")]
    NoProfiledPasses,
    #[error("{who} cannot report layer outputs")]
    NoLayerOutputs { who: &'static str },
    #[error("{0:?} is not a CUDA architecture such as sm_90")]
    NotCudaArch(String),
    #[error("kernel {kernel} is not in the PTX for {arch}")]
    MissingKernel { kernel: String, arch: String },
    #[error("--compare, option set {set}: {reason}")]
    Compare { set: String, reason: String },
    #[error("selftest failed at batch sizes {0:?}")]
    SelftestFailed(Vec<usize>),
}

/// Fails with [`CommandError::Usage`] unless `condition` holds.
fn require(condition: bool, message: impl FnOnce() -> String) -> Result<(), CommandError> {
    if condition {
        Ok(())
    } else {
        Err(CommandError::Usage(message()))
    }
}

/// The network and backend a command runs, as lc0's `-w`, `-b` and `-o` name them.
#[derive(Debug, Clone, Default)]
pub struct NetChoice {
    /// Weights file, `preset:NAME` or `bundled:NAME`; `None` is the bundled tiny net.
    pub weights: Option<String>,
    /// Backend name; `None` is the best one present.
    pub backend: Option<String>,
    /// Backend options, `key=value,key2=value2`.
    pub backend_options: String,
}

impl NetChoice {
    /// `-b`, or the best backend present.
    pub fn backend_name(&self) -> String {
        self.backend
            .clone()
            .unwrap_or_else(|| backend::best_backend_name().to_owned())
    }

    /// Loads the network `-w` names.
    pub fn network(&self) -> Result<Model, CommandError> {
        Ok(load_network(self.weights.as_deref())?.model)
    }

    /// The backend `-b` names with `-o`'s options followed by `extra` (may be empty).
    pub fn create_backend_with(&self, extra: &str) -> Result<Box<dyn Backend>, CommandError> {
        Ok(backend::create_backend(
            &self.backend_name(),
            self.network()?,
            &self.options_with(extra),
        )?)
    }

    /// `-o` with `extra` options after it.
    pub fn options_with(&self, extra: &str) -> String {
        [self.backend_options.as_str(), extra]
            .into_iter()
            .filter(|o| !o.is_empty())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A network as loaded for a command.
pub struct LoadedNetwork {
    pub model: Model,
    /// What the file says about itself (encoding, versions, size).
    pub file_info: FileInfo,
    /// The name it is shown by (the file, `preset:NAME` or `bundled:NAME`).
    pub name: String,
}

/// Loads a network by its `-w` spelling, with a progress bar while a preset is generated.
pub fn load_network(spec: Option<&str>) -> Result<LoadedNetwork, CommandError> {
    let source = NetSource::parse(spec)?;
    let name = source.display_name();
    match source.load(
        &LoadOptions::default(),
        &mut byte_progress(format!("generating {name}")),
    ) {
        Ok((model, file_info)) => Ok(LoadedNetwork {
            model,
            file_info,
            name,
        }),
        Err(source) => Err(CommandError::Load { name, source }),
    }
}

/// A progress bar on stderr for writing a network; hidden when stderr is not a terminal.
fn byte_progress(message: String) -> impl FnMut(u64, u64) {
    let bar = ProgressBar::new(0).with_message(message);
    // The template is a constant known to parse; the default style is only a fallback.
    let style = ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
        if done >= total {
            bar.finish_and_clear();
        }
    }
}
