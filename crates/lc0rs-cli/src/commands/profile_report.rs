//! The `backendbench --profile/--trace/--plot` outputs of a profiled backend.

use lc0rs::backend::{Backend, ProfileReport};
use lc0rs::profile::{chrome_trace, kernel_table, layer_table, operation_table, peak_for};

use super::{CommandError, ProfileOutputs};
use crate::charts::{roofline_chart, svg_chart};

/// Rows of the profile's kernel table.
const KERNEL_TABLE_ROWS: usize = 25;

/// Prints the plans and tables (stderr) and writes the trace and chart files `outputs` asks for:
/// for each GPU of a backend over several, under a heading and in files named for the GPU.
pub(super) fn report_profile(
    backend: &dyn Backend,
    outputs: &ProfileOutputs,
) -> Result<(), CommandError> {
    let reports = backend.profile_reports();
    if reports.is_empty() {
        return Err(CommandError::NoProfile);
    }
    for report in &reports {
        let gpu = if reports.len() > 1 { report.gpu } else { None };
        if let Some(gpu) = gpu {
            eprintln!("== GPU {gpu}: {}", report.device);
        }
        report_one(backend, report, &outputs.for_gpu(gpu))?;
    }
    Ok(())
}

/// The profile of one device.
fn report_one(
    backend: &dyn Backend,
    report: &ProfileReport,
    outputs: &ProfileOutputs,
) -> Result<(), CommandError> {
    if report.passes.is_empty() {
        return Err(CommandError::NoProfiledPasses);
    }
    if outputs.table {
        // What ran at each size: which kernel each operation's plan picked.
        for plan in &report.plans {
            eprintln!("plan at {plan}");
        }
        eprint!(
            "{}",
            operation_table(&report.passes, peak_for(&report.device))
        );
        eprint!("{}", layer_table(&report.passes));
        eprint!("{}", kernel_table(&report.passes, KERNEL_TABLE_ROWS));
    }
    if let Some(path) = &outputs.trace {
        let json = serde_json::to_string(&chrome_trace(&report.passes))?;
        write(path, json)?;
        eprintln!(
            "trace written to {} (open it in ui.perfetto.dev or chrome://tracing)",
            path.display()
        );
    }
    if let Some(path) = &outputs.plot {
        let title = format!(
            "{} on {}: GPU time by operation (batch {})",
            backend.name(),
            report.device,
            batch_list(&report.passes)
        );
        let svg = svg_chart(&report.passes, &title).map_err(|reason| CommandError::Chart {
            path: path.clone(),
            reason,
        })?;
        write(path, svg)?;
        eprintln!("chart written to {}", path.display());
    }
    if let Some(path) = &outputs.roofline {
        let chart_error = |reason: String| CommandError::Chart {
            path: path.clone(),
            reason,
        };
        let peak = peak_for(&report.device).ok_or_else(|| {
            chart_error(format!(
                "no peak figures for {} (the roofline needs them)",
                report.device
            ))
        })?;
        let title = format!(
            "{} on {}: operations on the roofline (batch {})",
            backend.name(),
            report.device,
            batch_list(&report.passes)
        );
        write(
            path,
            roofline_chart(&report.passes, peak, &title).map_err(chart_error)?,
        )?;
        eprintln!("roofline chart written to {}", path.display());
    }
    Ok(())
}

/// The batch sizes of the passes, in order, runs of one size named once: `1, 64, 256`.
fn batch_list(passes: &[lc0rs::profile::PassProfile]) -> String {
    let mut batches: Vec<usize> = passes.iter().map(|p| p.batch).collect();
    batches.dedup();
    batches
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn write(path: &std::path::Path, contents: String) -> Result<(), CommandError> {
    std::fs::write(path, contents).map_err(|source| CommandError::Write {
        path: path.to_owned(),
        source,
    })
}
