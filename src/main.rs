//! The `lc0rs` command line.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use lc0rs::backend::{BACKEND_NAMES, DEFAULT_POLICY_TEMPERATURE, create_backend};
use lc0rs::chess::{HistoryFill, PositionHistory};
use lc0rs::evaluate::evaluate_positions;
use lc0rs::netgen::all_preset_names;
use lc0rs::netsource::{NetSource, write_preset};
use lc0rs::weights::codec::LayerEncoding;
use lc0rs::weights::summary::Summary;
use lc0rs::weights::tower_summary::TowerSummary;
use lc0rs::weights::{LoadOptions, Model};

#[derive(Parser)]
#[command(
    name = "lc0rs",
    version,
    about = "A Rust backend for Leela Chess Zero transformer networks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a network: architecture, formats, parameters and FLOPs per position.
    Info {
        /// A weights file (.pb.gz or .pb), `preset:NAME` or `bundled:NAME`; default: the bundled
        /// tiny net.
        file: Option<String>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a valid lc0 network with deterministic random weights.
    GenNet {
        /// Architecture to generate.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(all_preset_names()))]
        preset: String,
        /// Random seed; the same seed gives the same weights.
        #[arg(long, default_value_t = lc0rs::netsource::PRESET_SEED)]
        seed: u64,
        /// Output file; `.pb` writes plain protobuf, anything else gzip.
        #[arg(short, long)]
        output: PathBuf,
        /// Layer encoding (float16, bfloat16 and float32 files need lc0 v0.33 or lc0rs).
        #[arg(long, default_value = "linear16", value_parser = clap::builder::PossibleValuesParser::new(LayerEncoding::ALL.map(LayerEncoding::name)))]
        encoding: String,
    },
    /// Play chess over UCI (for GUIs and tools): MCTS on the chosen backend.
    Uci {
        #[command(flatten)]
        net: NetArgs,
    },
    /// Evaluate positions: value, draw, moves left and the move probabilities.
    Eval {
        #[command(flatten)]
        net: NetArgs,
        /// `startpos [moves ...]` or `fen FEN [moves ...]`; repeat for several positions.
        #[arg(long = "position", required = true)]
        positions: Vec<String>,
        /// Policy softmax temperature.
        #[arg(long = "temp", default_value_t = DEFAULT_POLICY_TEMPERATURE)]
        temperature: f32,
        /// History fill when the game is shorter than 8 positions: no, fen_only, always.
        #[arg(long, default_value = "fen_only", value_parser = ["no", "fen_only", "always"])]
        history_fill: String,
        /// One JSON object per position instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a backend against the cpu oracle on random legal positions.
    Selftest {
        #[command(flatten)]
        net: NetArgs,
        /// Positions to compare (at least the largest batch size).
        #[arg(long, default_value_t = 256)]
        positions: usize,
        /// Batch sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [1usize, 7, 64, 256])]
        batch: Vec<usize>,
        /// Seed of the random games.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print one JSON object per batch size.
        #[arg(long)]
        json: bool,
        /// Also compare the residual stream after the embedding and each encoder layer (on
        /// the first 64 positions), to find where an error starts.
        #[arg(long)]
        layers: bool,
    },
    /// lc0's backend benchmark: positions per second at each batch size, as CSV.
    Backendbench {
        #[command(flatten)]
        net: NetArgs,
        /// Batches per size.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=999_999_999))]
        batches: u64,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
        start_batch_size: u64,
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1024))]
        max_batch_size: u64,
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
        batch_step: u64,
        /// Threads evaluating batches concurrently.
        #[arg(short = 't', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=128))]
        threads: u64,
        /// The position to evaluate (FEN); default the start position.
        #[arg(long)]
        fen: Option<String>,
        /// Print the CSV header only once.
        #[arg(long)]
        header_only_once: bool,
        /// Time every operation and print where the time goes, by operation, layer and kernel
        /// (to stderr): on NVIDIA from CUPTI kernel timestamps of graph replays, else with
        /// device events around each operation (cpu: the host clock).
        #[arg(long)]
        profile: bool,
        /// Write a Chrome/Perfetto trace of the profiled passes (implies profiling).
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
        /// Write the time breakdown as an SVG bar chart (implies profiling).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// Run the benchmark once per option set and print positions/s side by side, e.g.
        /// `gemm=blas,gemm=lt` (join several keys of one set with `+`).
        #[arg(long, value_name = "SETS")]
        compare: Option<String>,
    },
    /// List the GPU runtimes found and their GPUs, or why there are none.
    Devices,
    /// Compile every kernel with the vendor's run-time compiler (needs no GPU).
    CompileKernels {
        #[arg(long, value_parser = ["cuda", "hip"])]
        vendor: String,
        /// Target architecture, e.g. sm_80, sm_90 (cuda) or gfx90a, gfx1030, gfx1100 (hip).
        #[arg(long)]
        arch: String,
    },
}

/// The network and backend flags, as lc0 names them.
#[derive(clap::Args)]
struct NetArgs {
    /// Weights file, `preset:NAME` or `bundled:NAME`; default: the bundled tiny net.
    #[arg(short = 'w', long = "weights")]
    weights: Option<String>,
    /// Backend name; default: the best one present (cuda-fp16 with a usable NVIDIA GPU, else
    /// rocm-fp16 with an AMD GPU, else cpu).
    #[arg(short = 'b', long = "backend", value_parser = clap::builder::PossibleValuesParser::new(BACKEND_NAMES))]
    backend: Option<String>,
    /// Backend options, `key=value,key2=value2`.
    #[arg(short = 'o', long = "backend-opts", default_value = "")]
    backend_opts: String,
}

impl NetArgs {
    /// `-b`, or the best backend present.
    fn backend_name(&self) -> String {
        self.backend
            .clone()
            .unwrap_or_else(|| lc0rs::backend::best_backend_name().to_owned())
    }

    fn network(&self) -> Result<lc0rs::weights::Model> {
        let source = NetSource::parse(self.weights.as_deref())?;
        let name = source.display_name();
        let (network, _) = source
            .load(
                &LoadOptions::default(),
                &mut byte_progress(format!("generating {name}")),
            )
            .with_context(|| format!("loading {name}"))?;
        Ok(network)
    }

    fn create_backend(&self) -> Result<Box<dyn lc0rs::backend::Backend>> {
        Ok(create_backend(
            &self.backend_name(),
            self.network()?,
            &self.backend_opts,
        )?)
    }
}

fn main() -> std::process::ExitCode {
    // Timing spans and events go to stderr when asked for, e.g. RUST_LOG=lc0rs=trace.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .init();
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            // The cause chain, without a backtrace: these are user-facing errors.
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Info { file, json } => info(file.as_deref(), json),
        Command::GenNet {
            preset,
            seed,
            output,
            encoding,
        } => {
            let encoding = LayerEncoding::from_name(&encoding).expect("clap checked the name");
            gen_net(&preset, seed, &output, encoding)
        }
        Command::Selftest {
            net,
            positions,
            batch,
            seed,
            json,
            layers,
        } => selftest(&net, positions, &batch, seed, json, layers),
        Command::Backendbench {
            net,
            batches,
            start_batch_size,
            max_batch_size,
            batch_step,
            threads,
            fen,
            header_only_once,
            profile,
            trace,
            plot,
            compare,
        } => {
            let config = lc0rs::bench::BenchConfig {
                batches: batches as usize,
                start_batch_size: start_batch_size as usize,
                max_batch_size: max_batch_size as usize,
                batch_step: batch_step as usize,
                threads: threads as usize,
            };
            let outputs = ProfileOutputs {
                table: profile,
                trace,
                plot,
            };
            match compare {
                Some(sets) => compare_backends(&net, &config, fen.as_deref(), &sets),
                None => backendbench(&net, &config, fen.as_deref(), header_only_once, &outputs),
            }
        }
        Command::Uci { net } => {
            let config = lc0rs::uci::EngineConfig {
                weights: net.weights.clone(),
                backend: net.backend_name(),
                backend_options: net.backend_opts.clone(),
            };
            let out: lc0rs::uci::Output =
                std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
            lc0rs::uci::run(std::io::stdin().lock(), out, config);
            Ok(())
        }
        Command::Devices => {
            devices();
            Ok(())
        }
        Command::CompileKernels { vendor, arch } => compile_kernels(&vendor, &arch),
        Command::Eval {
            net,
            positions,
            temperature,
            history_fill,
            json,
        } => {
            let fill = HistoryFill::from_name(&history_fill).expect("clap checked the name");
            eval(&net, &positions, temperature, fill, json)
        }
    }
}

fn eval(
    net: &NetArgs,
    specs: &[String],
    temperature: f32,
    fill: HistoryFill,
    json: bool,
) -> Result<()> {
    anyhow::ensure!(
        temperature > 0.0 && temperature.is_finite(),
        "--temp must be a positive number, not {temperature}"
    );
    let histories = specs
        .iter()
        .map(|spec| PositionHistory::from_spec(spec))
        .collect::<Result<Vec<_>, _>>()?;
    let backend = net.create_backend()?;
    let results = evaluate_positions(backend.as_ref(), &histories, fill, temperature)?;
    for (spec, r) in specs.iter().zip(&results) {
        if json {
            let policy: serde_json::Map<String, serde_json::Value> = r
                .policy
                .iter()
                .map(|(m, p)| (m.clone(), serde_json::json!(p)))
                .collect();
            let object = serde_json::json!({
                "position": spec, "q": r.q, "d": r.d, "m": r.m, "wdl": r.wdl, "policy": policy,
            });
            println!("{object}");
        } else {
            let top: Vec<String> = r
                .policy
                .iter()
                .take(5)
                .map(|(m, p)| format!("{m} {:.1}%", p * 100.0))
                .collect();
            println!(
                "{spec}: q {:+.4} d {:.4} m {:.1} wdl {:.3}/{:.3}/{:.3} | {}",
                r.q,
                r.d,
                r.m,
                r.wdl[0],
                r.wdl[1],
                r.wdl[2],
                top.join(", ")
            );
        }
    }
    Ok(())
}

/// A progress bar on stderr for writing a network; hidden when stderr is not a terminal.
fn byte_progress(message: String) -> impl FnMut(u64, u64) {
    let bar = ProgressBar::new(0).with_message(message);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {bytes}/{total_bytes} ({eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
        if done >= total {
            bar.finish_and_clear();
        }
    }
}

fn info(spec: Option<&str>, json: bool) -> Result<()> {
    let source = NetSource::parse(spec)?;
    let name = source.display_name();
    let (network, file_info) = source
        .load(
            &LoadOptions::default(),
            &mut byte_progress(format!("generating {name}")),
        )
        .with_context(|| format!("loading {name}"))?;
    let (json_text, text) = match &network {
        Model::Attention(network) => {
            let summary = Summary::new(&name, network, &file_info);
            (serde_json::to_string_pretty(&summary)?, summary.to_text())
        }
        Model::Residual(tower) => {
            let summary = TowerSummary::new(&name, tower, &file_info);
            (serde_json::to_string_pretty(&summary)?, summary.to_text())
        }
    };
    println!("{}", if json { json_text } else { text });
    Ok(())
}

fn gen_net(
    preset: &str,
    seed: u64,
    output: &std::path::Path,
    encoding: LayerEncoding,
) -> Result<()> {
    let mut progress = byte_progress(format!("writing {}", output.display()));
    write_preset(preset, seed, encoding, output, &mut progress)?;
    eprintln!(
        "wrote {} ({preset}, seed {seed}, {})",
        output.display(),
        encoding.name()
    );
    Ok(())
}

fn selftest(
    net: &NetArgs,
    positions: usize,
    batches: &[usize],
    seed: u64,
    json: bool,
    layers: bool,
) -> Result<()> {
    use lc0rs::selftest::{compare, encode_all, evaluate_in_batches, random_histories};
    anyhow::ensure!(
        !batches.is_empty() && batches.iter().all(|&b| b > 0),
        "--batch needs positive sizes"
    );
    let network = net.network()?;
    let largest = batches.iter().copied().max().unwrap_or(1);
    let count = positions.max(largest);
    let backend = create_backend(&net.backend_name(), network.clone(), &net.backend_opts)?;
    // The oracle evaluates the same heads (and moves-left setting) as the backend under test.
    let shared: Vec<&str> = net
        .backend_opts
        .split(',')
        .map(str::trim)
        .filter(|o| {
            ["policy_head=", "value_head=", "mlh="]
                .iter()
                .any(|k| o.starts_with(k))
        })
        .collect();
    let oracle = create_backend("cpu", network, &shared.join(","))?;
    let histories = random_histories(count, seed);
    let encoded = encode_all(&histories, backend.as_ref());
    eprintln!(
        "selftest: {} vs cpu on {count} random positions",
        net.backend_name()
    );
    let want = evaluate_in_batches(oracle.as_ref(), &encoded, 64)?;
    let mut failed = Vec::new();
    for &batch in batches {
        let got = evaluate_in_batches(backend.as_ref(), &encoded, batch)?;
        let e = compare(&histories, &encoded, &got, &want, batch);
        let verdict = if e.passed() { "PASS" } else { "FAIL" };
        if json {
            println!("{}", serde_json::json!({"result": verdict, "errors": e}));
        } else {
            println!(
                "batch {batch:>4}: max|dP| {:.2e} mean|dP| {:.2e} logits rel-L2 {:.2e} |dQ| {:.2e} |dD| {:.2e} |dM| {:.2e} (limit ratio {:.2}) {verdict}",
                e.max_probability,
                e.mean_probability,
                e.max_logits_relative_l2,
                e.max_q,
                e.max_d,
                e.max_m,
                e.m_ratio
            );
        }
        if !e.passed() {
            failed.push(batch);
        }
    }
    if layers {
        let planes: Vec<_> = encoded.iter().take(64).map(|e| e.planes).collect();
        let got = backend
            .layer_outputs(&planes)?
            .context("this backend cannot report layer outputs")?;
        let want = oracle
            .layer_outputs(&planes)?
            .context("the cpu oracle reports layer outputs")?;
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let name = if i == 0 {
                "embedding".to_owned()
            } else {
                format!("encoder {}", i - 1)
            };
            let max = g
                .iter()
                .zip(w)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f32, f32::max);
            let diff: f64 = g.iter().zip(w).map(|(a, b)| f64::from(a - b).powi(2)).sum();
            let norm: f64 = w.iter().map(|b| f64::from(*b).powi(2)).sum();
            println!(
                "{name:<12} max|d| {max:.3e}  rel-L2 {:.3e}",
                (diff / norm.max(1e-30)).sqrt()
            );
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "selftest failed at batch sizes {failed:?}"
    );
    Ok(())
}

fn devices() {
    use lc0rs::gpu::GpuDevice;
    use lc0rs::gpu::cuda;
    println!("ROCm:");
    for line in lc0rs::gpu::hip::report() {
        println!("  {line}");
    }
    println!("hip-emu (an emulated AMD GPU on the CPU):");
    for line in lc0rs::gpu::emu::report() {
        println!("  {line}");
    }
    println!("CUDA:");
    for (library, present) in cuda::libraries_present() {
        println!(
            "  {library}: {}",
            if present { "found" } else { "not found" }
        );
    }
    for (library, version) in cuda::library_versions() {
        println!("  {library} {version}");
    }
    match cuda::device_count() {
        Err(e) => println!("  no GPUs: {e}"),
        Ok(0) => println!("  no GPUs: the driver reports none"),
        Ok(count) => {
            for ordinal in 0..count {
                match cuda::CudaDevice::new(ordinal) {
                    Ok(device) => {
                        let info = device.info();
                        println!(
                            "  gpu {ordinal}: {} ({}), {:.1} GiB, {} SMs, {}",
                            info.name,
                            info.arch,
                            info.memory_bytes as f64 / (1u64 << 30) as f64,
                            info.multiprocessors,
                            info.runtime
                        );
                    }
                    Err(e) => println!("  gpu {ordinal}: unusable: {e}"),
                }
            }
        }
    }
}

fn compile_kernels(vendor: &str, arch: &str) -> Result<()> {
    if vendor == "hip" {
        let started = std::time::Instant::now();
        let code = lc0rs::gpu::hip::compile_kernels(arch)?;
        for name in lc0rs::gpu::kernels::KERNEL_NAMES {
            println!("{name}: compiled");
        }
        eprintln!(
            "compiled {} kernels for {arch} with hipRTC in {:.2} s ({} byte code object)",
            lc0rs::gpu::kernels::KERNEL_NAMES.len(),
            started.elapsed().as_secs_f64(),
            code.len()
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    let ptx = lc0rs::gpu::cuda::nvrtc::compile(arch)?;
    let text = ptx.to_src();
    let number: u32 = arch
        .strip_prefix("sm_")
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("{arch:?} is not a CUDA architecture such as sm_90"))?;
    let names = lc0rs::gpu::kernels::cuda_kernel_names(number);
    for name in &names {
        let found = text.contains(&format!(".entry {name}("));
        println!("{name}: {}", if found { "compiled" } else { "MISSING" });
        anyhow::ensure!(found, "kernel {name} is not in the PTX for {arch}");
    }
    eprintln!(
        "compiled {} kernels for {arch} in {:.2} s",
        names.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What `backendbench` reports from profiled passes.
struct ProfileOutputs {
    table: bool,
    trace: Option<PathBuf>,
    plot: Option<PathBuf>,
}

impl ProfileOutputs {
    fn wanted(&self) -> bool {
        self.table || self.trace.is_some() || self.plot.is_some()
    }
}

fn check_bench_config(config: &lc0rs::bench::BenchConfig) -> Result<()> {
    anyhow::ensure!(
        config.start_batch_size <= config.max_batch_size,
        "--start-batch-size {} is larger than --max-batch-size {}",
        config.start_batch_size,
        config.max_batch_size
    );
    anyhow::ensure!(
        config.batches > config.threads,
        "--batches must exceed --threads (each thread's first batch is not timed)"
    );
    Ok(())
}

fn bench_position(fen: Option<&str>) -> Result<PositionHistory> {
    Ok(match fen {
        None => PositionHistory::startpos(),
        Some(fen) => PositionHistory::from_fen(fen)?,
    })
}

/// Creates the backend with `extra` options appended to `-o`.
fn bench_backend(
    net: &NetArgs,
    extra: &str,
    config: &lc0rs::bench::BenchConfig,
) -> Result<Box<dyn lc0rs::backend::Backend>> {
    let options = [net.backend_opts.as_str(), extra]
        .into_iter()
        .filter(|o| !o.is_empty())
        .collect::<Vec<_>>()
        .join(",");
    let backend = create_backend(&net.backend_name(), net.network()?, &options)?;
    anyhow::ensure!(
        config.max_batch_size <= backend.attributes().max_batch,
        "--max-batch-size {} exceeds the backend's max_batch {}",
        config.max_batch_size,
        backend.attributes().max_batch
    );
    Ok(backend)
}

fn backendbench(
    net: &NetArgs,
    config: &lc0rs::bench::BenchConfig,
    fen: Option<&str>,
    header_only_once: bool,
    outputs: &ProfileOutputs,
) -> Result<()> {
    check_bench_config(config)?;
    let history = bench_position(fen)?;
    let backend = bench_backend(
        net,
        if outputs.wanted() { "profile=true" } else { "" },
        config,
    )?;
    let planes =
        lc0rs::chess::encode_position(&history, backend.input_format(), HistoryFill::FenOnly)
            .planes;
    eprintln!(
        "backendbench: {} on {}",
        backend.name(),
        net.weights.as_deref().unwrap_or("bundled:tiny")
    );
    let mut printed = 0usize;
    lc0rs::bench::run(backend.as_ref(), &planes, config, &mut |stats| {
        if printed == 0 || (!header_only_once && printed.is_multiple_of(32)) {
            println!("{}", lc0rs::bench::HEADER);
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

/// Rows of the profile's kernel table.
const KERNEL_TABLE_ROWS: usize = 25;

fn report_profile(backend: &dyn lc0rs::backend::Backend, outputs: &ProfileOutputs) -> Result<()> {
    use lc0rs::profile::{
        chrome_trace, kernel_table, layer_table, operation_table, peak_for, svg_chart,
    };
    let report = backend
        .profile_report()
        .context("the backend recorded no profile")?;
    anyhow::ensure!(!report.passes.is_empty(), "no profiled passes");
    if outputs.table {
        eprint!(
            "{}",
            operation_table(&report.passes, peak_for(&report.device))
        );
        eprint!("{}", layer_table(&report.passes));
        eprint!("{}", kernel_table(&report.passes, KERNEL_TABLE_ROWS));
    }
    if let Some(path) = &outputs.trace {
        let json = serde_json::to_string(&chrome_trace(&report.passes))?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "trace written to {} (open it in ui.perfetto.dev or chrome://tracing)",
            path.display()
        );
    }
    if let Some(path) = &outputs.plot {
        let mut batches: Vec<usize> = report.passes.iter().map(|p| p.batch).collect();
        batches.dedup();
        let batches: Vec<String> = batches.iter().map(usize::to_string).collect();
        let title = format!(
            "{} on {}: GPU time by operation (batch {})",
            backend.name(),
            report.device,
            batches.join(", ")
        );
        let svg = svg_chart(&report.passes, &title)
            .map_err(|e| anyhow::anyhow!("drawing the chart for {}: {e}", path.display()))?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("chart written to {}", path.display());
    }
    Ok(())
}

/// `--compare`: the benchmark once per option set, positions/s side by side.
fn compare_backends(
    net: &NetArgs,
    config: &lc0rs::bench::BenchConfig,
    fen: Option<&str>,
    sets: &str,
) -> Result<()> {
    check_bench_config(config)?;
    let history = bench_position(fen)?;
    let sets: Vec<String> = sets
        .split(',')
        .map(|s| s.trim().replace('+', ","))
        .filter(|s| !s.is_empty())
        .collect();
    anyhow::ensure!(
        sets.len() >= 2,
        "--compare needs at least two option sets, e.g. gemm=blas,gemm=lt"
    );
    let mut columns: Vec<Vec<lc0rs::bench::SizeStats>> = Vec::new();
    for set in &sets {
        let backend = bench_backend(net, set, config)?;
        let planes =
            lc0rs::chess::encode_position(&history, backend.input_format(), HistoryFill::FenOnly)
                .planes;
        eprintln!("backendbench: {} with {set}", backend.name());
        let mut stats = Vec::new();
        lc0rs::bench::run(backend.as_ref(), &planes, config, &mut |s| {
            stats.push(s.clone())
        })?;
        columns.push(stats);
    }
    let header: Vec<String> = sets.iter().map(|s| format!("{s:>16}")).collect();
    println!("size,{}, {:>8}", header.join(","), "ratio");
    for (i, first) in columns[0].iter().enumerate() {
        let values: Vec<String> = columns
            .iter()
            .map(|c| format!("{:>16.0}", c[i].mean_nps))
            .collect();
        let ratio = columns[columns.len() - 1][i].mean_nps / first.mean_nps;
        println!("{:>4},{}, {ratio:>8.3}", first.size, values.join(","));
    }
    eprintln!("ratio = last set / first set (mean positions per second)");
    Ok(())
}
