//! `lc0rs backendbench`: lc0's benchmark on one backend (with an optional profile), or
//! `--compare`: once per option set, positions/s side by side.

use std::path::PathBuf;

use super::profile_report::report_profile;
use super::{CommandError, NetChoice, require};
use crate::backend::Backend;
use crate::bench::{self, BenchConfig, SizeStats};
use crate::chess::{HistoryFill, InputPlanes, PositionHistory, encode_position};

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
}

/// Runs the benchmark and prints lc0's CSV (the header again every 32 sizes unless
/// `header_only_once`), then the memory line and the profile outputs asked for.
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
    let planes = planes_for(&history, backend.as_ref());
    eprintln!(
        "backendbench: {} on {}",
        backend.name(),
        net.weights.as_deref().unwrap_or("bundled:tiny")
    );
    let mut printed = 0usize;
    bench::run(backend.as_ref(), &planes, config, &mut |stats| {
        if header_due(printed, header_only_once) {
            println!("{}", bench::HEADER);
        }
        println!("{}", stats.row());
        printed += 1;
    })?;
    if let Some(memory) = backend.memory_report() {
        eprintln!("{memory}");
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

/// `--compare`: the benchmark once per option set of `sets` (`a,b`, keys of one set joined by
/// `+`), then a table of mean positions/s per size with the ratio last / first.
pub fn compare_option_sets(
    net: &NetChoice,
    config: &BenchConfig,
    fen: Option<&str>,
    sets: &str,
) -> Result<(), CommandError> {
    check_config(config)?;
    let history = position(fen)?;
    let sets = parse_option_sets(sets)?;
    let mut columns: Vec<Vec<SizeStats>> = Vec::new();
    for set in &sets {
        let backend = create_backend(net, set, config)?;
        let planes = planes_for(&history, backend.as_ref());
        eprintln!("backendbench: {} with {set}", backend.name());
        let mut stats = Vec::new();
        bench::run(backend.as_ref(), &planes, config, &mut |s| {
            stats.push(s.clone())
        })?;
        columns.push(stats);
    }
    print!("{}", comparison_table(&sets, &columns));
    eprintln!("ratio = last set / first set (mean positions per second)");
    Ok(())
}

/// The option sets of `--compare`: comma-separated, `+` joining the keys of one set.
pub fn parse_option_sets(sets: &str) -> Result<Vec<String>, CommandError> {
    let sets: Vec<String> = sets
        .split(',')
        .map(|s| s.trim().replace('+', ","))
        .filter(|s| !s.is_empty())
        .collect();
    require(sets.len() >= 2, || {
        "--compare needs at least two option sets, e.g. gemm=blas,gemm=lt".to_owned()
    })?;
    Ok(sets)
}

/// The `--compare` CSV: a header naming the sets, then per size the mean positions/s of each
/// set and the ratio of the last set to the first.
pub fn comparison_table(sets: &[String], columns: &[Vec<SizeStats>]) -> String {
    let header: Vec<String> = sets.iter().map(|s| format!("{s:>16}")).collect();
    let mut out = format!("size,{}, {:>8}\n", header.join(","), "ratio");
    let (Some(first_column), Some(last_column)) = (columns.first(), columns.last()) else {
        return out;
    };
    for (i, first) in first_column.iter().enumerate() {
        let values: Vec<String> = columns
            .iter()
            .map(|c| format!("{:>16.0}", c[i].mean_nps))
            .collect();
        let ratio = last_column[i].mean_nps / first.mean_nps;
        out.push_str(&format!(
            "{:>4},{}, {ratio:>8.3}\n",
            first.size,
            values.join(",")
        ));
    }
    out
}

fn check_config(config: &BenchConfig) -> Result<(), CommandError> {
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
fn position(fen: Option<&str>) -> Result<PositionHistory, CommandError> {
    Ok(match fen {
        None => PositionHistory::startpos(),
        Some(fen) => PositionHistory::from_fen(fen)?,
    })
}

fn planes_for(history: &PositionHistory, backend: &dyn Backend) -> InputPlanes {
    encode_position(history, backend.input_format(), HistoryFill::FenOnly).planes
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

    fn stats(size: usize, mean_nps: f64) -> SizeStats {
        SizeStats {
            size,
            mean_nps,
            mean_ms: 0.0,
            sdev_ms: 0.0,
            cv: 0.0,
            max_nps: 0.0,
            median_nps: 0.0,
            min_nps: 0.0,
            first_max_ms: 0.0,
            first_mean_ms: 0.0,
        }
    }

    #[test]
    fn option_sets_split_on_commas_and_join_keys_on_plus() {
        let sets = parse_option_sets(" gemm=blas , gemm=lt+threads=2,").unwrap();
        assert_eq!(sets, ["gemm=blas", "gemm=lt,threads=2"]);
        let error = parse_option_sets("gemm=lt").unwrap_err().to_string();
        assert!(error.contains("at least two option sets"), "{error}");
    }

    #[test]
    fn comparison_rows_hold_each_sets_rate_and_last_over_first() {
        let sets = ["a=1".to_owned(), "a=2".to_owned()];
        let columns = vec![
            vec![stats(1, 100.0), stats(2, 400.0)],
            vec![stats(1, 150.0), stats(2, 100.0)],
        ];
        let table = comparison_table(&sets, &columns);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        let header: Vec<&str> = lines[0].split(',').map(str::trim).collect();
        assert_eq!(header, ["size", "a=1", "a=2", "ratio"]);
        let row: Vec<&str> = lines[1].split(',').map(str::trim).collect();
        assert_eq!(row, ["1", "100", "150", "1.500"]);
        let row: Vec<&str> = lines[2].split(',').map(str::trim).collect();
        assert_eq!(row, ["2", "400", "100", "0.250"]);
    }

    #[test]
    fn the_header_repeats_every_32_rows_unless_once() {
        let repeated: Vec<usize> = (0..70).filter(|&i| header_due(i, false)).collect();
        assert_eq!(repeated, [0, 32, 64]);
        let once: Vec<usize> = (0..70).filter(|&i| header_due(i, true)).collect();
        assert_eq!(once, [0]);
    }
}
