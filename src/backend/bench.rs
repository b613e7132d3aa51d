//! `lc0rs backendbench`: lc0's backend benchmark, its procedure and its CSV output
//! (docs/lc0-format.md §6). The position (default the start position, history fill
//! `fen_only`) is repeated to fill each batch, and each call reads what a search reads: the
//! position's Q, D, M and its legal moves' policy logits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::backend::{Backend, BackendError, PolicyPicks};
use crate::chess::InputPlanes;

/// lc0's CSV header.
pub const HEADER: &str =
    "size, mean nps, mean ms,   sdev,     cv, max nps,  median, min nps, first max, first mean";

/// The statistics of one batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeStats {
    pub size: usize,
    pub mean_nps: f64,
    pub mean_ms: f64,
    pub sdev_ms: f64,
    pub cv: f64,
    pub max_nps: f64,
    pub median_nps: f64,
    pub min_nps: f64,
    pub first_max_ms: f64,
    pub first_mean_ms: f64,
}

impl SizeStats {
    /// From per-batch times (first batches excluded) and the first-batch completion offsets.
    pub fn from_times(
        size: usize,
        times: &[Duration],
        first_completions: &[Duration],
        threads: usize,
    ) -> Self {
        let ms: Vec<f64> = times.iter().map(|t| t.as_secs_f64() * 1e3).collect();
        let n = ms.len() as f64;
        let total: f64 = ms.iter().sum();
        let mean = total / n;
        let sdev = if ms.len() > 1 {
            (ms.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        let mut sorted = ms.clone();
        sorted.sort_by(f64::total_cmp);
        let median = if sorted.len() % 2 == 1 {
            sorted[sorted.len() / 2]
        } else {
            (sorted[sorted.len() / 2 - 1] + sorted[sorted.len() / 2]) / 2.0
        };
        let nps = |ms: f64| size as f64 / (ms / 1e3);
        let mut firsts: Vec<f64> = first_completions
            .iter()
            .map(|t| t.as_secs_f64() * 1e3)
            .collect();
        firsts.sort_by(f64::total_cmp);
        let first_max = firsts.iter().scan(0.0, |prev, &t| {
            let gap = t - *prev;
            *prev = t;
            Some(gap)
        });
        Self {
            size,
            mean_nps: size as f64 * n / (total / 1e3),
            mean_ms: mean,
            sdev_ms: sdev,
            cv: sdev / mean,
            max_nps: nps(sorted[0]),
            median_nps: nps(median),
            min_nps: nps(sorted[sorted.len() - 1]),
            first_max_ms: first_max.fold(0.0, f64::max),
            first_mean_ms: firsts.last().copied().unwrap_or(0.0) / threads as f64,
        }
    }

    /// One CSV row in lc0's widths and formats.
    pub fn row(&self) -> String {
        format!(
            "{:>4},{:>9.0},{:>8},{:>7.4},{:>7.4},{:>8.0},{:>8.0},{:>8.0},{:>10.4},{:>11.4}",
            self.size,
            self.mean_nps,
            general_4(self.mean_ms),
            self.sdev_ms,
            self.cv,
            self.max_nps,
            self.median_nps,
            self.min_nps,
            self.first_max_ms,
            self.first_mean_ms
        )
    }
}

/// C++ iostream's default float format with precision 4 (`%.4g`).
pub fn general_4(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let exponent = x.abs().log10().floor() as i32;
    if !(-4..4).contains(&exponent) {
        let s = format!("{:.3e}", x);
        let (mantissa, exp) = s.split_once('e').expect("scientific format");
        let mantissa = trim_zeros(mantissa);
        let exp: i32 = exp.parse().expect("exponent");
        return format!(
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    }
    let decimals = (3 - exponent).max(0) as usize;
    trim_zeros(&format!("{x:.decimals$}")).to_owned()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The benchmark's settings (lc0's flags).
#[derive(Debug, Clone)]
pub struct BenchConfig {
    pub batches: usize,
    pub start_batch_size: usize,
    pub max_batch_size: usize,
    pub batch_step: usize,
    pub threads: usize,
}

/// Runs the benchmark on `position`, whose legal moves have the policy indices `legal`,
/// calling `report` with each size's statistics as it completes.
pub fn run(
    backend: &dyn Backend,
    position: &InputPlanes,
    legal: &[usize],
    config: &BenchConfig,
    report: &mut dyn FnMut(&SizeStats),
) -> Result<(), BackendError> {
    if backend.usage_report().is_some() {
        // Over several GPUs a call is split into parts whose sizes follow the GPUs' measured
        // speeds, so sizes the benchmark never asks for reach each GPU: their one-time work
        // (graph capture, GEMM choice) is done here, as the search does at `isready`, and not
        // in the timed calls.
        backend.prepare(config.max_batch_size, config.threads)?;
    }
    let picks = |size| {
        let mut picks = PolicyPicks::with_capacity(size, legal.len());
        for _ in 0..size {
            picks.push(legal.iter().copied());
        }
        picks
    };
    let warm = vec![*position; config.max_batch_size];
    let warm_picks = picks(config.max_batch_size);
    for _ in 0..config.threads {
        for _ in 0..2 {
            backend.evaluate_picked(&warm, &warm_picks)?;
        }
    }
    backend.reset_profile();
    let mut size = config.start_batch_size;
    while size <= config.max_batch_size {
        let inputs = vec![*position; size];
        let picks = picks(size);
        let counter = AtomicUsize::new(0);
        let times = Mutex::new(Vec::new());
        let firsts = Mutex::new(Vec::new());
        let error = Mutex::new(None);
        let start = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..config.threads {
                scope.spawn(|| {
                    let mut last = start;
                    let mut first = true;
                    while counter.fetch_add(1, Ordering::Relaxed) < config.batches {
                        if let Err(e) = backend.evaluate_picked(&inputs, &picks) {
                            *error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                            return;
                        }
                        let now = Instant::now();
                        if first {
                            firsts
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(now - start);
                            first = false;
                        } else {
                            times
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push((now - last) / config.threads as u32);
                        }
                        last = now;
                    }
                });
            }
        });
        if let Some(e) = error.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        let times = times.into_inner().unwrap_or_else(|p| p.into_inner());
        let firsts = firsts.into_inner().unwrap_or_else(|p| p.into_inner());
        report(&SizeStats::from_times(
            size,
            &times,
            &firsts,
            config.threads,
        ));
        size += config.batch_step;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_format_matches_cpp() {
        assert_eq!(general_4(28.49), "28.49");
        assert_eq!(general_4(28.4949), "28.49");
        assert_eq!(general_4(3.0), "3");
        assert_eq!(general_4(0.123456), "0.1235");
        assert_eq!(general_4(1234.5), "1234");
        assert_eq!(general_4(12345.0), "1.234e+04");
        assert_eq!(general_4(0.00001234), "1.234e-05");
    }

    #[test]
    fn row_has_lc0_widths() {
        let ms = |v: &[f64]| {
            v.iter()
                .map(|&m| Duration::from_secs_f64(m / 1e3))
                .collect::<Vec<_>>()
        };
        let s = SizeStats::from_times(64, &ms(&[28.0, 29.0, 28.5]), &ms(&[30.0]), 1);
        let row = s.row();
        let widths: Vec<usize> = row.split(',').map(str::len).collect();
        assert_eq!(widths, [4, 9, 8, 7, 7, 8, 8, 8, 10, 11]);
        let header_widths: Vec<usize> = HEADER.split(',').map(str::len).collect();
        assert_eq!(widths, header_widths);
        assert!(row.starts_with("  64,     2246,    28.5,"), "{row}");
        // max nps from the fastest batch, min from the slowest, median of three.
        assert_eq!(
            (s.max_nps.round(), s.min_nps.round(), s.median_nps.round()),
            (2286.0, 2207.0, 2246.0)
        );
        assert!((s.sdev_ms - 0.5).abs() < 1e-9 && (s.first_max_ms - 30.0).abs() < 1e-9);
    }
}
