//! lc0's time management: the `legacy` time manager (lc0's default `TimeManager`) that turns a
//! clock into a budget for one move, and smart pruning, which ends a search once the best
//! move can no longer be overtaken in the time or playouts left.

use std::time::Duration;

/// A clock as `go` gives it, for the side to move.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    /// Time left, in ms (negative clocks count as zero).
    pub time_ms: u64,
    pub increment_ms: u64,
    /// Moves to the next time control (`movestogo`), where the GUI says.
    pub moves_to_go: Option<u64>,
}

/// lc0's `legacy` time manager with its defaults (slowmover 1, midpoint-move 51.5, steepness
/// 7, immediate-use 1, first-move-bonus 1.8, book-ply-bonus 0.25). It lives for a game: the
/// first move gets a bonus, and time a search did not use is saved for the next moves.
#[derive(Debug, Clone)]
pub struct TimeManager {
    move_overhead_ms: u64,
    first_move_of_game: bool,
    /// Time saved by earlier searches that stopped before their budget (lc0's piggy bank).
    spared_ms: i64,
}

const MIDPOINT_MOVE: f32 = 51.5;
const STEEPNESS: f32 = 7.0;
const SPEND_SAVED_TIME: f32 = 1.0;
const FIRST_MOVE_BONUS: f32 = 1.8;
const BOOK_PLY_BONUS: f32 = 0.25;

/// The moves a game at `ply` is expected still to last: the median residual life of a
/// log-logistic distribution of game lengths (lc0's `ComputeEstimatedMovesToGo`).
pub fn estimated_moves_to_go(ply: u32, midpoint: f32, steepness: f32) -> f32 {
    let moves = ply as f32 / 2.0;
    midpoint * (1.0 + 2.0 * (moves / midpoint).powf(steepness)).powf(1.0 / steepness) - moves
}

impl TimeManager {
    pub fn new(move_overhead: Duration) -> Self {
        Self {
            move_overhead_ms: move_overhead.as_millis().try_into().unwrap_or(u64::MAX),
            first_move_of_game: true,
            spared_ms: 0,
        }
    }

    pub fn move_overhead(&self) -> Duration {
        Duration::from_millis(self.move_overhead_ms)
    }

    /// The time to spend on a move at game ply `ply` with `clock`, as lc0's legacy manager
    /// plans it: the clock plus the increments to come, less the overhead and the saved time,
    /// split over the moves expected (or `movestogo` if fewer), the first move of a game
    /// getting a bonus, the saved time spent at once; never more than the clock less the
    /// overhead.
    pub fn budget(&mut self, clock: Clock, ply: u32) -> Duration {
        let time = clock.time_ms as f32;
        let mut moves_to_go = estimated_moves_to_go(ply, MIDPOINT_MOVE, STEEPNESS);
        if let Some(n) = clock
            .moves_to_go
            .filter(|&n| n > 0 && (n as f32) < moves_to_go)
        {
            moves_to_go = n as f32;
        }
        let overhead = self.move_overhead_ms as f32;
        let mut total =
            (time + clock.increment_ms as f32 * (moves_to_go - 1.0) - overhead).max(0.0);
        let mut to_squander = 0i64;
        if self.spared_ms > 0 {
            total = (total - self.spared_ms as f32).max(0.0);
            to_squander = (self.spared_ms as f32 * SPEND_SAVED_TIME) as i64;
            self.spared_ms -= to_squander;
        }
        let mut this_move = total / moves_to_go;
        if std::mem::take(&mut self.first_move_of_game) {
            this_move *= 1.0 + FIRST_MOVE_BONUS + BOOK_PLY_BONUS * ply.min(12) as f32;
        }
        this_move += to_squander as f32;
        let ceiling = clock.time_ms as i64 - self.move_overhead_ms as i64;
        let budget_ms = (this_move as i64).min(ceiling).max(0);
        Duration::from_millis(budget_ms as u64)
    }

    /// Saves what a search left of its `budget` (or takes back what it overspent).
    pub fn search_done(&mut self, budget: Duration, used: Duration) {
        let as_ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.spared_ms += as_ms(budget) - as_ms(used);
    }
}

/// lc0's smart-pruning tolerances: no pruning in the first 200 ms after the first
/// evaluation, and 300 playouts added to the count the speed is estimated from.
pub const SMART_PRUNING_TOLERANCE: Duration = Duration::from_millis(200);
const SMART_PRUNING_TOLERANCE_NODES: u64 = 300;

/// What smart pruning looks at.
#[derive(Debug, Clone, Copy)]
pub struct PruningInput<'a> {
    /// Visits of each root move.
    pub edge_visits: &'a [u32],
    /// Playouts of this search, and the time since its first one was gathered.
    pub playouts: u64,
    pub since_first_eval: Duration,
    pub time_left: Option<Duration>,
    pub playouts_left: Option<u64>,
}

/// The playouts smart pruning expects the search to have left: those that fit in the time left
/// at the speed so far and those of the playout limit, the smaller, divided by `factor`; `None`
/// while smart pruning is off or within its tolerance after the first playout (lc0's
/// `SmartPruningStopper` and the hint it gives the gathering).
pub fn remaining_playouts(input: &PruningInput, factor: f32) -> Option<f64> {
    if factor <= 0.0 || input.since_first_eval < SMART_PRUNING_TOLERANCE {
        return None;
    }
    let factor = f64::from(factor);
    let elapsed_ms = input.since_first_eval.as_millis().max(1) as f64;
    let nps = 1000.0 * (input.playouts + SMART_PRUNING_TOLERANCE_NODES) as f64 / elapsed_ms + 1.0;
    let by_time = input
        .time_left
        .map_or(f64::INFINITY, |t| t.as_secs_f64() * nps / factor);
    let by_playouts = input
        .playouts_left
        .map_or(f64::INFINITY, |n| n as f64 / factor);
    Some(by_time.min(by_playouts))
}

/// Whether the best root move can no longer be overtaken (lc0's `SmartPruningStopper`): the
/// playouts left (see [`remaining_playouts`]) are fewer than the lead of the most visited move
/// over the second.
pub fn best_move_is_settled(input: PruningInput, factor: f32) -> bool {
    let Some(remaining) = remaining_playouts(&input, factor) else {
        return false;
    };
    let mut sorted = input.edge_visits.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let lead = match sorted.as_slice() {
        [] => return false,
        [best] => *best,
        [best, second, ..] => best - second,
    };
    remaining < f64::from(lead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_to_go_follow_the_log_logistic_residual() {
        // At ply 0: 51.5·(1 + 0)^(1/7) − 0 = 51.5.
        assert!((estimated_moves_to_go(0, 51.5, 7.0) - 51.5).abs() < 1e-4);
        // At move 51.5 (ply 103): 51.5·3^(1/7) − 51.5 = 51.5·(1.16993 − 1) ≈ 8.751.
        let at_midpoint = estimated_moves_to_go(103, 51.5, 7.0);
        assert!((at_midpoint - 8.751).abs() < 0.01, "{at_midpoint}");
    }

    #[test]
    fn the_budget_is_lc0s_legacy_plan() {
        let ms = Duration::from_millis;
        let mut manager = TimeManager::new(ms(200));
        let clock = Clock {
            time_ms: 60_000,
            increment_ms: 1_000,
            moves_to_go: None,
        };
        // First move at ply 0: (60000 + 1000·50.5 − 200) / 51.5 = 2141.75…, times the bonus
        // 1 + 1.8 + 0 = 2.8: 5996.9 → 5996 ms.
        assert_eq!(manager.budget(clock, 0), ms(5_996));
        // No bonus afterwards; at ply 20 (move 10): 51.5·(1+2·(10/51.5)^7)^(1/7) − 10 =
        // 41.50015; (60000 + 1000·40.50015 − 200) / 41.50015 = 2416.86 → 2416 ms.
        assert_eq!(manager.budget(clock, 20), ms(2_416));
        // 1000 ms saved: taken out of the plan and spent at once:
        // (100300 − 1000) / 41.5 + 1000 = 3392.77 → 3392 ms.
        manager.search_done(ms(3_000), ms(2_000));
        assert_eq!(manager.budget(clock, 20), ms(3_392));
        // `movestogo` 5 below the estimate: (60000 + 4000 − 200) / 5 = 12760, never beyond
        // the clock less the overhead.
        let control = Clock {
            moves_to_go: Some(5),
            ..clock
        };
        assert_eq!(manager.budget(control, 20), ms(12_760));
        let short = Clock {
            time_ms: 150,
            increment_ms: 50,
            moves_to_go: None,
        };
        assert_eq!(manager.budget(short, 20), Duration::ZERO);
    }

    #[test]
    fn pruning_stops_when_the_lead_cannot_be_caught() {
        let input = |visits: &'static [u32], left_ms| PruningInput {
            edge_visits: visits,
            playouts: 700,
            since_first_eval: Duration::from_millis(1_000),
            time_left: Some(Duration::from_millis(left_ms)),
            playouts_left: None,
        };
        // 1000 nps + 1: 0.5 s left is 500.5 playouts, / 1.33 = 376.3 < a lead of 400.
        assert!(best_move_is_settled(input(&[500, 100, 100], 500), 1.33));
        // A lead of 300 can still be caught.
        assert!(!best_move_is_settled(input(&[400, 100, 200], 500), 1.33));
        // Factor 0 turns it off; so does the first 200 ms.
        assert!(!best_move_is_settled(input(&[500, 100, 100], 500), 0.0));
        let early = PruningInput {
            since_first_eval: Duration::from_millis(100),
            ..input(&[500, 100, 100], 500)
        };
        assert!(!best_move_is_settled(early, 1.33));
        // A playout limit bounds it too: 100 left / 1.33 = 75.2 < a lead of 80.
        let by_nodes = PruningInput {
            time_left: None,
            playouts_left: Some(100),
            ..input(&[180, 100], 500)
        };
        assert!(best_move_is_settled(by_nodes, 1.33));
    }
}
