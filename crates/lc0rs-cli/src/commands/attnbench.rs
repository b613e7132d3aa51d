//! `lc0rs attnbench`: the attention implementations side by side at lc0's shapes, as CSV (the
//! columns of `scripts/attnbench/sdpa.py`, so PyTorch's rows can be appended).

use lc0rs::backend::executor::open_device;
use lc0rs::gpu::attention_bench::{AttentionImpl, AttnBenchError, Case, Measurement, measure};
use lc0rs::profile::peak_for;

use super::CommandError;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct AttnBenchConfig {
    /// `cuda-fp16`, `rocm-fp16` or `hip-emu`.
    pub backend: String,
    pub gpu: usize,
    pub heads: Vec<usize>,
    pub depths: Vec<usize>,
    pub batches: Vec<usize>,
    /// Without and/or with the smolgen bias.
    pub smolgen: Vec<bool>,
    pub implementations: Vec<AttentionImpl>,
    pub warmup: usize,
    pub iterations: usize,
    pub repeats: usize,
}

/// Measures every implementation at every shape and prints one CSV row each; an implementation
/// the device lacks gets an `unavailable` row. Fails (after the other rows) if any output
/// differs from the f64 reference beyond its tolerance.
pub fn attnbench(config: &AttnBenchConfig) -> Result<(), CommandError> {
    check_shapes(config)?;
    let device = open_device(&config.backend, config.gpu)
        .map_err(|e| CommandError::Usage(format!("attnbench on {}: {e}", config.backend)))?;
    let info = device.info();
    let peak = peak_for(&info.name);
    eprintln!(
        "attnbench on {} ({}, {} SMs/CUs, warp {}; {}): median of {} runs of {} calls after {} warm-up calls",
        info.name,
        info.arch,
        info.multiprocessors,
        info.warp_size,
        peak.map_or("no peak figures for this device", |p| p.source),
        config.repeats,
        config.iterations,
        config.warmup,
    );
    println!("{}", Measurement::CSV_HEADER);
    let mut wrong = Vec::new();
    for case in cases(config) {
        for &implementation in &config.implementations {
            let counts = (config.warmup, config.iterations, config.repeats);
            match measure(device.as_ref(), implementation, case, counts) {
                Ok(m) => println!("{}", m.csv_row(peak)),
                Err(AttnBenchError::Unavailable { reason, .. }) => println!(
                    "{}",
                    row_without_numbers(implementation, &case, "unavailable", &reason)
                ),
                Err(error @ AttnBenchError::Wrong { .. }) => {
                    let note = error.to_string();
                    println!(
                        "{}",
                        row_without_numbers(implementation, &case, "mismatch", &note)
                    );
                    wrong.push(note);
                }
                Err(AttnBenchError::Gpu(error)) => {
                    return Err(CommandError::Usage(format!(
                        "attnbench: {} at {case:?}: {error}",
                        implementation.name()
                    )));
                }
            }
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(CommandError::Usage(format!(
            "attnbench: {} implementation(s) differ from the f64 reference: {}",
            wrong.len(),
            wrong.join("; ")
        )))
    }
}

/// The largest batch: the kernels' grids put the positions in the second dimension.
const MAX_BATCH: usize = 65_535;

fn check_shapes(config: &AttnBenchConfig) -> Result<(), CommandError> {
    if let Some(b) = config.batches.iter().find(|&&b| b == 0 || b > MAX_BATCH) {
        return Err(CommandError::Usage(format!(
            "attnbench: batch size {b} (from 1 to {MAX_BATCH})"
        )));
    }
    if config.heads.contains(&0) {
        return Err(CommandError::Usage("attnbench: 0 heads".to_owned()));
    }
    Ok(())
}

/// Every shape of the configuration, heads outermost, batch innermost.
fn cases(config: &AttnBenchConfig) -> Vec<Case> {
    let mut cases = Vec::new();
    for &heads in &config.heads {
        for &depth in &config.depths {
            for &smolgen in &config.smolgen {
                for &batch in &config.batches {
                    cases.push(Case {
                        heads,
                        depth,
                        batch,
                        smolgen,
                    });
                }
            }
        }
    }
    cases
}

/// A row without numbers: the shape, six empty numeric fields (time, rates, shares, error),
/// the status and a note (commas replaced, so that it stays one field).
fn row_without_numbers(
    implementation: AttentionImpl,
    case: &Case,
    status: &str,
    note: &str,
) -> String {
    format!(
        "{},{},{},{},{},,,,,,,{status},{}",
        implementation.name(),
        case.heads,
        case.depth,
        case.batch,
        if case.smolgen { "yes" } else { "no" },
        note.replace(',', ";")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_without_numbers_have_every_column() {
        let case = Case {
            heads: 24,
            depth: 32,
            batch: 1,
            smolgen: true,
        };
        let row = row_without_numbers(
            AttentionImpl::TensorCores,
            &case,
            "unavailable",
            "no kernel, here",
        );
        let fields: Vec<&str> = row.split(',').collect();
        let header: Vec<&str> = Measurement::CSV_HEADER.split(',').collect();
        assert_eq!(fields.len(), header.len(), "{row}");
        assert_eq!(fields[0], "mma");
        assert_eq!(fields[header.len() - 2], "unavailable");
        assert_eq!(fields[header.len() - 1], "no kernel; here");
    }
}
