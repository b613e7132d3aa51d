//! The engine's UCI options: the list `uci` shows and what `setoption` changes.

use std::str::FromStr;
use std::time::Duration;

use super::score::ScoreType;
use super::{Engine, UciError, say, truncate};
use crate::search::SearchParams;
use crate::search::time::TimeManager;

/// Time kept back per move for the GUI and the transfer of the move (lc0's MoveOverheadMs).
pub const DEFAULT_MOVE_OVERHEAD_MS: u64 = 200;
/// lc0's SmartPruningFactor in UCI mode.
pub const DEFAULT_SMART_PRUNING_FACTOR: f32 = 1.33;
/// The root's visits below which one search thread gathers alone (see
/// [`SearchParams::single_thread_visits`]): about one GPU minibatch, so that a second thread's
/// batch is never more than the tree already knows.
pub const DEFAULT_SINGLE_THREAD_VISITS: u64 = 256;

/// The search parameters of the UCI engine: the library's, with lc0's UCI-mode smart pruning.
pub fn uci_search_params() -> SearchParams {
    SearchParams {
        smart_pruning_factor: DEFAULT_SMART_PRUNING_FACTOR,
        // lc0's key: transpositions answered from the cache (most in endgames, where a search
        // reaches the same positions by many move orders).
        exact_cache_key: false,
        single_thread_visits: DEFAULT_SINGLE_THREAD_VISITS,
        ..SearchParams::default()
    }
}

impl Engine {
    pub(super) fn identify(&self) {
        let p = uci_search_params();
        let lines = [
            format!("id name lc0rs {}", env!("CARGO_PKG_VERSION")),
            "id author the lc0rs authors".to_owned(),
            "option name WeightsFile type string default <bundled>".to_owned(),
            format!(
                "option name Backend type string default {}",
                self.config.backend
            ),
            "option name BackendOptions type string default".to_owned(),
            "option name Threads type spin default 0 min 0 max 128".to_owned(),
            format!(
                "option name SingleThreadVisits type spin default {} min 0 max 100000000",
                p.single_thread_visits
            ),
            "option name TaskWorkers type spin default -1 min -1 max 128".to_owned(),
            format!(
                "option name MinibatchSize type spin default {} min 0 max 1024",
                p.minibatch
            ),
            format!("option name CPuct type string default {}", p.cpuct),
            format!(
                "option name FpuReduction type string default {}",
                p.fpu_reduction
            ),
            format!(
                "option name PolicyTemperature type string default {}",
                p.policy_temperature
            ),
            format!(
                "option name NNCacheSize type spin default {} min 0 max 100000000",
                p.cache_size
            ),
            format!(
                "option name NNCacheExactKey type check default {}",
                p.exact_cache_key
            ),
            format!(
                "option name SmartPruningFactor type string default {}",
                p.smart_pruning_factor
            ),
            format!(
                "option name MaxCollisionVisits type spin default {} min 1 max 100000000",
                p.max_collision_visits
            ),
            format!(
                "option name MaxCollisionVisitsScalingStart type spin default {} min 1 max 100000",
                p.collision_scaling_start
            ),
            format!(
                "option name MaxCollisionVisitsScalingEnd type spin default {} min 0 max 100000000",
                p.collision_scaling_end
            ),
            format!(
                "option name MaxCollisionVisitsScalingPower type string default {}",
                p.collision_scaling_power
            ),
            format!(
                "option name MaxOutOfOrderEvalsFactor type string default {}",
                p.max_out_of_order_evals_factor
            ),
            format!(
                "option name MoveOverheadMs type spin default {DEFAULT_MOVE_OVERHEAD_MS} min 0 max 100000000"
            ),
            "option name Ponder type check default true".to_owned(),
            "option name MultiPV type spin default 1 min 1 max 500".to_owned(),
            "option name UCI_ShowWDL type check default false".to_owned(),
            score_type_option(),
            "option name VerboseMoveStats type check default false".to_owned(),
            "option name UCI_Chess960 type check default false".to_owned(),
            "uciok".to_owned(),
        ];
        for line in lines {
            say(&self.out, &line);
        }
    }

    /// `setoption name NAME [value VALUE]`; a bad one is answered with an `info string`
    /// naming the option and why.
    pub(super) fn set_option(&mut self, rest: &str) {
        let Some(rest) = rest.strip_prefix("name ") else {
            return self.tell("setoption needs `name NAME [value VALUE]`");
        };
        let (name, value) = match rest.split_once(" value") {
            Some((n, v)) => (n.trim(), v.trim()),
            None => (rest.trim(), ""),
        };
        self.stop();
        if let Err(reason) = self.apply_option(&name.to_ascii_lowercase(), value) {
            self.tell(&format!("option {}: {reason}", truncate(name)));
        }
    }

    fn apply_option(&mut self, name: &str, value: &str) -> Result<(), UciError> {
        let mut params = self.params;
        match name {
            "weightsfile" => self.reload(|c| c.weights = non_default(value)),
            "backend" => self.reload(|c| c.backend = value.to_owned()),
            "backendoptions" => self.reload(|c| c.backend_options = value.to_owned()),
            "threads" => params.threads = parse_in(value, 0, 128)?,
            "singlethreadvisits" => params.single_thread_visits = parse_in(value, 0, 100_000_000)?,
            // lc0's −1: chosen by the cores, the search threads and the backend.
            "taskworkers" => {
                let count: i32 = parse_in(value, -1, 128)?;
                params.task_workers = usize::try_from(count).ok();
            }
            "minibatchsize" => params.minibatch = parse_in(value, 0, 1024)?,
            "cpuct" => params.cpuct = parse_in(value, 0.0, 100.0)?,
            "fpureduction" => params.fpu_reduction = parse_in(value, -10.0, 10.0)?,
            "policytemperature" => params.policy_temperature = parse_in(value, 0.01, 100.0)?,
            "nncachesize" => params.cache_size = parse_in(value, 0, 100_000_000)?,
            "nncacheexactkey" => params.exact_cache_key = parse_check(value)?,
            "smartpruningfactor" => params.smart_pruning_factor = parse_in(value, 0.0, 10.0)?,
            // lc0's ranges for its collision and out-of-order budgets.
            "maxcollisionvisits" => params.max_collision_visits = parse_in(value, 1, 100_000_000)?,
            "maxcollisionvisitsscalingstart" => {
                params.collision_scaling_start = parse_in(value, 1, 100_000)?;
            }
            "maxcollisionvisitsscalingend" => {
                params.collision_scaling_end = parse_in(value, 0, 100_000_000)?;
            }
            "maxcollisionvisitsscalingpower" => {
                params.collision_scaling_power = parse_in(value, 0.01, 100.0)?;
            }
            "maxoutoforderevalsfactor" => {
                params.max_out_of_order_evals_factor = parse_in(value, 0.0, 100.0)?;
            }
            "uci_chess960" => params.chess960 = parse_check(value)?,
            "multipv" => params.multipv = parse_in(value, 1, 500)?,
            "uci_showwdl" => self.style.show_wdl = parse_check(value)?,
            "scoretype" => self.style.score_type = parse_score_type(value)?,
            "verbosemovestats" => self.style.verbose_move_stats = parse_check(value)?,
            // GUIs send it; pondering needs nothing set up beforehand.
            "ponder" => {
                parse_check(value)?;
            }
            // MoveOverhead: the name earlier lc0rs releases used.
            "moveoverheadms" | "moveoverhead" => {
                let overhead = Duration::from_millis(parse_in(value, 0, 100_000_000)?);
                self.time_manager = TimeManager::new(overhead);
            }
            _ => return Err(UciError::UnknownOption),
        }
        self.params = params;
        Ok(())
    }
}

/// lc0's ScoreType: a `combo` of its score types, `WDL_mu` by default.
fn score_type_option() -> String {
    let mut line = format!(
        "option name ScoreType type combo default {}",
        ScoreType::default().name()
    );
    for t in ScoreType::ALL {
        line.push_str(" var ");
        line.push_str(t.name());
    }
    line
}

/// ScoreType's value: one of its choices, spelled exactly as listed (as lc0 requires).
fn parse_score_type(value: &str) -> Result<ScoreType, UciError> {
    ScoreType::from_name(value).ok_or_else(|| UciError::NotAChoice {
        value: truncate(value).to_owned(),
        choices: ScoreType::ALL.map(ScoreType::name).join(", "),
    })
}

/// A `check` option's value.
fn parse_check(value: &str) -> Result<bool, UciError> {
    value
        .parse()
        .map_err(|_| UciError::NotABool(truncate(value).to_owned()))
}

fn parse_in<T: FromStr + PartialOrd + std::fmt::Display>(
    value: &str,
    min: T,
    max: T,
) -> Result<T, UciError> {
    match value.parse::<T>() {
        Ok(v) if v >= min && v <= max => Ok(v),
        _ => Err(UciError::OutOfRange {
            value: truncate(value).to_owned(),
            min: min.to_string(),
            max: max.to_string(),
        }),
    }
}

fn non_default(value: &str) -> Option<String> {
    (!value.is_empty() && value != "<bundled>").then(|| value.to_owned())
}
