//! The `backendbench --profile/--trace/--plot` outputs of a profiled backend.

use super::{CommandError, ProfileOutputs};
use crate::backend::Backend;
use crate::profile::{
    chrome_trace, kernel_table, layer_table, operation_table, peak_for, roofline_chart, svg_chart,
};

/// Rows of the profile's kernel table.
const KERNEL_TABLE_ROWS: usize = 25;

/// Prints the plans and tables (stderr) and writes the trace and chart files `outputs` asks for.
pub(super) fn report_profile(
    backend: &dyn Backend,
    outputs: &ProfileOutputs,
) -> Result<(), CommandError> {
    let report = backend.profile_report().ok_or(CommandError::NoProfile)?;
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
fn batch_list(passes: &[crate::profile::PassProfile]) -> String {
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
