//! `lc0rs backendbench --compare`: the benchmark once per option set, each in a process of its
//! own, and the mean positions/s side by side.
//!
//! A process of its own, so that every set starts from the state of a lone run: no set inherits
//! another's device memory, graphs or GEMM algorithm choices, and the order of the sets cannot
//! favour one.

use std::path::Path;
use std::process::{Command, Stdio};

use lc0rs::backend::bench::BenchConfig;

use super::backendbench::{check_config, position};
use super::{CommandError, NetChoice, require};

/// One row of a set's benchmark: batch size and mean positions per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeRate {
    pub size: usize,
    pub mean_nps: f64,
}

/// `--compare`: `lc0rs backendbench` with the same flags once per option set of `sets` (`a,b`,
/// keys of one set joined by `+`, added to `-o`), then a table of mean positions/s per size
/// with the ratio last / first. Each run's progress and errors go to stderr as they come.
pub fn compare_option_sets(
    net: &NetChoice,
    config: &BenchConfig,
    fen: Option<&str>,
    sets: &str,
) -> Result<(), CommandError> {
    check_config(config)?;
    position(fen)?;
    let sets = parse_option_sets(sets)?;
    let exe = std::env::current_exe().map_err(|e| CommandError::Compare {
        set: sets[0].clone(),
        reason: format!("finding the lc0rs executable: {e}"),
    })?;
    let columns = sets
        .iter()
        .map(|set| benchmark_in_own_process(&exe, &child_arguments(net, config, fen, set), set))
        .collect::<Result<Vec<_>, _>>()?;
    check_same_sizes(&sets, &columns)?;
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

/// The arguments of `lc0rs` benchmarking `set`: the net, backend, position and sizes given,
/// the set after the common `-o` options, the CSV header once.
fn child_arguments(
    net: &NetChoice,
    config: &BenchConfig,
    fen: Option<&str>,
    set: &str,
) -> Vec<String> {
    let mut args: Vec<String> = [
        "backendbench",
        "--header-only-once",
        "--backend-opts",
        &net.options_with(set),
        "--batches",
        &config.batches.to_string(),
        "--start-batch-size",
        &config.start_batch_size.to_string(),
        "--max-batch-size",
        &config.max_batch_size.to_string(),
        "--batch-step",
        &config.batch_step.to_string(),
        "--threads",
        &config.threads.to_string(),
    ]
    .map(str::to_owned)
    .into();
    for (flag, value) in [
        ("--weights", net.weights.as_deref()),
        ("--backend", net.backend.as_deref()),
        ("--fen", fen),
    ] {
        if let Some(value) = value {
            args.extend([flag.to_owned(), value.to_owned()]);
        }
    }
    args
}

/// Runs `exe args` with stderr passed through and reads the rates from its CSV.
fn benchmark_in_own_process(
    exe: &Path,
    args: &[String],
    set: &str,
) -> Result<Vec<SizeRate>, CommandError> {
    let failed = |reason: String| CommandError::Compare {
        set: set.to_owned(),
        reason,
    };
    let output = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| failed(format!("starting {}: {e}", exe.display())))?;
    if !output.status.success() {
        return Err(failed(format!(
            "backendbench {} (its error above)",
            output.status
        )));
    }
    let csv = String::from_utf8_lossy(&output.stdout);
    rates_from_csv(&csv).ok_or_else(|| failed(format!("no benchmark rows in its output {csv:?}")))
}

/// The size and mean positions/s of each row of backendbench's CSV (lc0's columns: size first,
/// mean nps second), header lines skipped; `None` if a row does not parse or there is none.
fn rates_from_csv(csv: &str) -> Option<Vec<SizeRate>> {
    let rows: Vec<SizeRate> = csv
        .lines()
        .filter(|line| !line.trim_start().starts_with("size"))
        .map(|line| {
            let mut fields = line.split(',').map(str::trim);
            let size = fields.next()?.parse().ok()?;
            let mean_nps = fields.next()?.parse().ok()?;
            Some(SizeRate { size, mean_nps })
        })
        .collect::<Option<_>>()?;
    (!rows.is_empty()).then_some(rows)
}

/// Every set's rows are for the batch sizes of the first set's, in the same order (the table
/// pairs them by row); a run that printed other rows is an error naming its set.
fn check_same_sizes(sets: &[String], columns: &[Vec<SizeRate>]) -> Result<(), CommandError> {
    let sizes = |column: &[SizeRate]| column.iter().map(|r| r.size).collect::<Vec<_>>();
    let Some(first) = columns.first().map(|c| sizes(c)) else {
        return Ok(());
    };
    for (set, column) in sets.iter().zip(columns) {
        let these = sizes(column);
        if these != first {
            return Err(CommandError::Compare {
                set: set.clone(),
                reason: format!("its rows are for batch sizes {these:?}, not {first:?}"),
            });
        }
    }
    Ok(())
}

/// The `--compare` CSV: a header naming the sets, then per size the mean positions/s of each
/// set and the ratio of the last set to the first.
pub fn comparison_table(sets: &[String], columns: &[Vec<SizeRate>]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(size: usize, mean_nps: f64) -> SizeRate {
        SizeRate { size, mean_nps }
    }

    #[test]
    fn option_sets_split_on_commas_and_join_keys_on_plus() {
        let sets = parse_option_sets(" gemm=blas , gemm=lt+threads=2,").unwrap();
        assert_eq!(sets, ["gemm=blas", "gemm=lt,threads=2"]);
        let error = parse_option_sets("gemm=lt").unwrap_err().to_string();
        assert!(error.contains("at least two option sets"), "{error}");
    }

    #[test]
    fn each_set_runs_with_the_common_flags_and_its_options_last() {
        let net = NetChoice {
            weights: Some("t82.pb.gz".into()),
            backend: None,
            backend_options: "max_batch=64".into(),
        };
        let config = BenchConfig {
            batches: 50,
            start_batch_size: 2,
            max_batch_size: 8,
            batch_step: 3,
            threads: 1,
        };
        let args = child_arguments(
            &net,
            &config,
            Some("8/8/8/8/8/8/8/K1k5 w - - 0 1"),
            "gemm=lt",
        );
        let expected = "backendbench --header-only-once --backend-opts max_batch=64,gemm=lt \
                        --batches 50 --start-batch-size 2 --max-batch-size 8 --batch-step 3 \
                        --threads 1 --weights t82.pb.gz --fen";
        assert_eq!(args[..args.len() - 1].join(" "), expected);
        assert_eq!(args.last().unwrap(), "8/8/8/8/8/8/8/K1k5 w - - 0 1");
    }

    #[test]
    fn rates_come_from_the_first_two_columns_of_each_row() {
        let csv = "size, mean nps, mean ms\n   1,     1263,  0.7918\n  16,    14440, 1.108\n";
        assert_eq!(
            rates_from_csv(csv),
            Some(vec![rate(1, 1263.0), rate(16, 14440.0)])
        );
        assert_eq!(rates_from_csv("size, mean nps\n"), None);
        assert_eq!(rates_from_csv("size, mean nps\n  1, fast\n"), None);
    }

    #[test]
    fn sets_whose_rows_are_for_other_sizes_are_an_error() {
        let sets = ["a=1".to_owned(), "a=2".to_owned()];
        let same = vec![
            vec![rate(1, 1.0), rate(2, 2.0)],
            vec![rate(1, 3.0), rate(2, 4.0)],
        ];
        assert!(check_same_sizes(&sets, &same).is_ok());
        let short = vec![vec![rate(1, 1.0), rate(2, 2.0)], vec![rate(1, 3.0)]];
        let error = check_same_sizes(&sets, &short).unwrap_err().to_string();
        assert!(error.contains("a=2") && error.contains("[1]"), "{error}");
        let other = vec![vec![rate(1, 1.0)], vec![rate(4, 3.0)]];
        assert!(check_same_sizes(&sets, &other).is_err());
    }

    #[test]
    fn comparison_rows_hold_each_sets_rate_and_last_over_first() {
        let sets = ["a=1".to_owned(), "a=2".to_owned()];
        let columns = vec![
            vec![rate(1, 100.0), rate(2, 400.0)],
            vec![rate(1, 150.0), rate(2, 100.0)],
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
}
