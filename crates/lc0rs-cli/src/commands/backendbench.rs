//! `lc0rs backendbench`: lc0's benchmark on one backend, with an optional profile.

use std::path::PathBuf;

use lc0rs::backend::Backend;
use lc0rs::backend::bench::{self, BenchConfig};
use lc0rs::chess::policy_index::entry_moves_with_indices;
use lc0rs::chess::{HistoryFill, PositionHistory, encode_position};

use super::profile_report::report_profile;
use super::{CommandError, NetChoice, require};

/// What `backendbench` reports from profiled passes.
#[derive(Debug, Clone, Default)]
pub struct ProfileOutputs {
    /// The operation, layer and kernel tables on stderr.
    pub table: bool,
    /// A Chrome/Perfetto trace file.
    pub trace: Option<PathBuf>,
    /// An SVG bar chart.
    pub plot: Option<PathBuf>,
    /// An SVG roofline chart.
    pub roofline: Option<PathBuf>,
}

impl ProfileOutputs {
    /// Whether any output needs the passes profiled.
    pub fn wanted(&self) -> bool {
        self.table || self.trace.is_some() || self.plot.is_some() || self.roofline.is_some()
    }

    /// The outputs for GPU `gpu` of several: each file's name with `.gpuN` before its
    /// extension (`trace.json` → `trace.gpu1.json`); unchanged for `None`.
    pub fn for_gpu(&self, gpu: Option<usize>) -> Self {
        let Some(gpu) = gpu else {
            return self.clone();
        };
        let named = |path: &Option<PathBuf>| {
            path.as_ref().map(|path| {
                let stem = path.file_stem().unwrap_or_default().to_string_lossy();
                let name = match path.extension() {
                    Some(ext) => format!("{stem}.gpu{gpu}.{}", ext.to_string_lossy()),
                    None => format!("{stem}.gpu{gpu}"),
                };
                path.with_file_name(name)
            })
        };
        Self {
            table: self.table,
            trace: named(&self.trace),
            plot: named(&self.plot),
            roofline: named(&self.roofline),
        }
    }
}

/// Runs the benchmark and prints lc0's CSV (the header again every 32 sizes unless
/// `header_only_once`), then the memory lines, how several GPUs shared the work, and the profile
/// outputs asked for.
pub fn backendbench(
    net: &NetChoice,
    config: &BenchConfig,
    fen: Option<&str>,
    header_only_once: bool,
    outputs: &ProfileOutputs,
) -> Result<(), CommandError> {
    check_config(config)?;
    let history = position(fen)?;
    let profile_option = if outputs.wanted() { "profile=true" } else { "" };
    let backend = create_backend(net, profile_option, config)?;
    let encoded = encode_position(&history, backend.input_format(), HistoryFill::FenOnly);
    let legal: Vec<usize> = entry_moves_with_indices(history.last(), encoded.transform)
        .into_iter()
        .map(|(_, index)| index)
        .collect();
    eprintln!(
        "backendbench: {} on {}",
        backend.name(),
        net.weights.as_deref().unwrap_or("bundled:tiny")
    );
    let mut printed = 0usize;
    bench::run(
        backend.as_ref(),
        &encoded.planes,
        &legal,
        config,
        &mut |stats| {
            if header_due(printed, header_only_once) {
                println!("{}", bench::HEADER);
            }
            println!("{}", stats.row());
            printed += 1;
        },
    )?;
    if let Some(memory) = backend.memory_report() {
        eprintln!("{memory}");
    }
    if let Some(usage) = backend.usage_report() {
        eprintln!("{usage}");
    }
    if outputs.wanted() {
        report_profile(backend.as_ref(), outputs)?;
    }
    Ok(())
}

/// lc0 repeats the CSV header every 32 rows unless told to print it once.
fn header_due(rows_printed: usize, header_only_once: bool) -> bool {
    rows_printed == 0 || (!header_only_once && rows_printed.is_multiple_of(32))
}

pub(super) fn check_config(config: &BenchConfig) -> Result<(), CommandError> {
    require(config.start_batch_size <= config.max_batch_size, || {
        format!(
            "--start-batch-size {} is larger than --max-batch-size {}",
            config.start_batch_size, config.max_batch_size
        )
    })?;
    require(config.batches > config.threads, || {
        "--batches must exceed --threads (each thread's first batch is not timed)".to_owned()
    })
}

/// The benchmarked position: the FEN given, or the start position.
pub(super) fn position(fen: Option<&str>) -> Result<PositionHistory, CommandError> {
    Ok(match fen {
        None => PositionHistory::startpos(),
        Some(fen) => PositionHistory::from_fen(fen)?,
    })
}

/// The backend with `extra` options appended to `-o`, checked to take the largest batch.
fn create_backend(
    net: &NetChoice,
    extra: &str,
    config: &BenchConfig,
) -> Result<Box<dyn Backend>, CommandError> {
    let backend = net.create_backend_with(extra)?;
    let max_batch = backend.attributes().max_batch;
    require(config.max_batch_size <= max_batch, || {
        format!(
            "--max-batch-size {} exceeds the backend's max_batch {max_batch}",
            config.max_batch_size
        )
    })?;
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_repeats_every_32_rows_unless_once() {
        let repeated: Vec<usize> = (0..70).filter(|&i| header_due(i, false)).collect();
        assert_eq!(repeated, [0, 32, 64]);
        let once: Vec<usize> = (0..70).filter(|&i| header_due(i, true)).collect();
        assert_eq!(once, [0]);
    }
}
