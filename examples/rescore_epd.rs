//! Rescores a file of positions with an lc0 network: EPD in, CSV out (Q, W/D/L, moves left,
//! the best move and the most likely moves of each position), several batches in flight.
//!
//! ```text
//! cargo run --release --example rescore_epd -- [-w NET] [-b BACKEND] [-o OPTIONS]
//!     [--batch N] [--threads N] [--top N] [--temperature T] IN.epd OUT.csv
//! ```
//!
//! `NET` is a `.pb.gz` path or `bundled:tiny` (the default); `BACKEND` defaults to the best one
//! present; `--batch` and `--threads` to the backend's recommended batch and threads.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::process::ExitCode;

use lc0rs::backend::{best_backend_name, create_backend};
use lc0rs::netsource::NetSource;
use lc0rs::rescore::{RescoreOptions, rescore_epd};
use lc0rs::weights::LoadOptions;

/// The command line.
struct Arguments {
    weights: Option<String>,
    backend: Option<String>,
    options: String,
    batch: Option<usize>,
    threads: Option<usize>,
    top: usize,
    temperature: f32,
    input: String,
    output: String,
}

const USAGE: &str = "usage: rescore_epd [-w NET] [-b BACKEND] [-o OPTIONS] [--batch N] \
[--threads N] [--top N] [--temperature T] IN.epd OUT.csv";

fn parse_arguments() -> Result<Arguments, String> {
    let mut args = std::env::args().skip(1);
    let mut parsed = Arguments {
        weights: None,
        backend: None,
        options: String::new(),
        batch: None,
        threads: None,
        top: 5,
        temperature: 1.0,
        input: String::new(),
        output: String::new(),
    };
    let mut files = Vec::new();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        let number = |text: String| {
            text.parse::<usize>()
                .map_err(|e| format!("{arg} {text}: {e}"))
        };
        match arg.as_str() {
            "-w" | "--weights" => parsed.weights = Some(value()?),
            "-b" | "--backend" => parsed.backend = Some(value()?),
            "-o" | "--options" => parsed.options = value()?,
            "--batch" => parsed.batch = Some(number(value()?)?),
            "--threads" => parsed.threads = Some(number(value()?)?),
            "--top" => parsed.top = number(value()?)?,
            "--temperature" => {
                let text = value()?;
                parsed.temperature = text
                    .parse()
                    .ok()
                    .filter(|t: &f32| t.is_finite() && *t > 0.0)
                    .ok_or(format!("--temperature {text}: expected a positive number"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            _ if arg.starts_with('-') => return Err(format!("unknown option {arg}\n{USAGE}")),
            _ => files.push(arg),
        }
    }
    let [input, output] = <[String; 2]>::try_from(files)
        .map_err(|files| format!("expected IN.epd and OUT.csv, got {files:?}\n{USAGE}"))?;
    parsed.input = input;
    parsed.output = output;
    Ok(parsed)
}

fn run(args: Arguments) -> Result<(), String> {
    let source = NetSource::parse(args.weights.as_deref()).map_err(|e| e.to_string())?;
    let (network, _) = source
        .load(&LoadOptions::default(), &mut |_, _| {})
        .map_err(|e| e.to_string())?;
    let name = args
        .backend
        .as_deref()
        .unwrap_or_else(|| best_backend_name());
    let backend = create_backend(name, network, &args.options).map_err(|e| e.to_string())?;
    let attributes = backend.attributes();
    let options = RescoreOptions {
        batch: args.batch.unwrap_or(attributes.recommended_batch),
        threads: args.threads.unwrap_or(attributes.recommended_threads),
        temperature: args.temperature,
        top: args.top,
    };
    let input = File::open(&args.input).map_err(|e| format!("{}: {e}", args.input))?;
    let output = File::create(&args.output).map_err(|e| format!("{}: {e}", args.output))?;
    let summary = rescore_epd(
        backend.as_ref(),
        BufReader::new(input),
        BufWriter::new(output),
        &options,
    )
    .map_err(|e| format!("{}: {e}", args.input))?;
    eprintln!(
        "{} positions in {:.2} s ({:.0} positions/s) on {} (batch {}, {} threads)",
        summary.positions,
        summary.seconds,
        summary.positions as f64 / summary.seconds.max(1e-9),
        backend.name(),
        options.batch,
        options.threads
    );
    Ok(())
}

fn main() -> ExitCode {
    match parse_arguments().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("rescore_epd: {message}");
            ExitCode::FAILURE
        }
    }
}
