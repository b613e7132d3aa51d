//! The `go` command: its parameters as lc0 reads them, and the limits they give a search
//! through lc0's time manager.

use std::time::Duration;

use shakmaty::Color;

use super::UciError;
use crate::search::Limits;
use crate::search::time::{Clock, TimeManager};

/// The parameters of one `go`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoCommand {
    pub wtime: Option<u64>,
    pub btime: Option<u64>,
    pub winc: Option<u64>,
    pub binc: Option<u64>,
    pub movestogo: Option<u64>,
    pub movetime: Option<u64>,
    pub nodes: Option<u64>,
    pub depth: Option<u64>,
    pub mate: Option<u64>,
    pub infinite: bool,
    pub ponder: bool,
    /// `searchmoves`: the root moves to consider, as written (empty: all).
    pub searchmoves: Vec<String>,
}

/// The words `go` knows; `searchmoves` takes the tokens up to the next of them.
const KEYWORDS: [&str; 12] = [
    "wtime",
    "btime",
    "winc",
    "binc",
    "movestogo",
    "movetime",
    "nodes",
    "depth",
    "mate",
    "infinite",
    "ponder",
    "searchmoves",
];

impl GoCommand {
    /// Reads `go`'s arguments.
    pub fn parse(rest: &str) -> Result<Self, UciError> {
        let mut go = Self::default();
        let mut tokens = rest.split_whitespace().peekable();
        while let Some(key) = tokens.next() {
            let mut number = || -> Result<u64, UciError> {
                let value = tokens.next().ok_or_else(|| UciError::MissingValue {
                    command: "go",
                    key: key.to_owned(),
                })?;
                // Clocks can run negative in some GUIs; treat that as no time left.
                value
                    .parse::<i64>()
                    .map(|v| v.max(0) as u64)
                    .map_err(|_| UciError::NotANumber {
                        key: key.to_owned(),
                        value: super::truncate(value).to_owned(),
                    })
            };
            match key {
                "wtime" => go.wtime = Some(number()?),
                "btime" => go.btime = Some(number()?),
                "winc" => go.winc = Some(number()?),
                "binc" => go.binc = Some(number()?),
                "movestogo" => go.movestogo = Some(number()?),
                "movetime" => go.movetime = Some(number()?),
                "nodes" => go.nodes = Some(number()?),
                "depth" => go.depth = Some(number()?),
                "mate" => go.mate = Some(number()?),
                "infinite" => go.infinite = true,
                "ponder" => go.ponder = true,
                "searchmoves" => {
                    while let Some(m) = tokens.next_if(|t| !KEYWORDS.contains(t)) {
                        go.searchmoves.push(m.to_owned());
                    }
                }
                other => {
                    return Err(UciError::UnknownGoParameter(
                        super::truncate(other).to_owned(),
                    ));
                }
            }
        }
        Ok(go)
    }

    /// The clock of the side to move, if `go` gave one.
    pub fn clock(&self, turn: Color) -> Option<Clock> {
        let (time, increment) = match turn {
            Color::White => (self.wtime, self.winc),
            Color::Black => (self.btime, self.binc),
        };
        Some(Clock {
            time_ms: time?,
            increment_ms: increment.unwrap_or(0),
            moves_to_go: self.movestogo,
        })
    }

    /// The limits of this `go` for `turn` at game ply `ply`, as lc0 sets them: `nodes`,
    /// `depth` (the mean playout depth) and `mate`; `movetime` less the move overhead; the
    /// time manager's budget from the clock. `infinite`, `ponder` and `mate` searches have no
    /// time limit (a ponder search gets its budget at `ponderhit`). Also the budget given, for
    /// [`TimeManager::search_done`].
    pub fn limits(
        &self,
        turn: Color,
        ply: u32,
        manager: &mut TimeManager,
    ) -> (Limits, Option<Duration>) {
        let as_u32 = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let mut limits = Limits {
            nodes: self.nodes,
            depth: self.depth.map(as_u32),
            mate: self.mate.map(as_u32),
            ..Limits::default()
        };
        if self.infinite || self.ponder || self.mate.is_some() {
            return (limits, None);
        }
        let overhead = manager.move_overhead();
        limits.time = self
            .movetime
            .map(|t| Duration::from_millis(t).saturating_sub(overhead));
        let budget = self.clock(turn).map(|clock| manager.budget(clock, ply));
        if let Some(budget) = budget {
            limits.time = Some(limits.time.map_or(budget, |t| t.min(budget)));
        }
        (limits, budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_reads_every_parameter() {
        let go = GoCommand::parse(
            "wtime 1000 btime -5 winc 10 binc 20 movestogo 7 searchmoves e2e4 d2d4 nodes 50 ponder",
        )
        .unwrap();
        assert_eq!(
            go,
            GoCommand {
                wtime: Some(1_000),
                btime: Some(0),
                winc: Some(10),
                binc: Some(20),
                movestogo: Some(7),
                movetime: None,
                nodes: Some(50),
                depth: None,
                mate: None,
                infinite: false,
                ponder: true,
                searchmoves: vec!["e2e4".to_owned(), "d2d4".to_owned()],
            }
        );
        assert_eq!(
            go.clock(Color::Black),
            Some(Clock {
                time_ms: 0,
                increment_ms: 20,
                moves_to_go: Some(7)
            })
        );
        assert!(GoCommand::parse("nodes many").is_err());
        assert!(GoCommand::parse("nodes").is_err());
        assert!(GoCommand::parse("sideways 3").is_err());
        let deep = GoCommand::parse("depth 5 mate 3").unwrap();
        assert_eq!((deep.depth, deep.mate), (Some(5), Some(3)));
    }

    #[test]
    fn limits_follow_lc0s_stoppers() {
        let ms = Duration::from_millis;
        let mut manager = TimeManager::new(ms(200));
        let go = |s: &str| GoCommand::parse(s).unwrap();
        // movetime less the overhead.
        let (limits, budget) = go("movetime 1000").limits(Color::White, 0, &mut manager);
        assert_eq!((limits.time, budget), (Some(ms(800)), None));
        // infinite and ponder: no time limit, nodes kept.
        let (limits, _) = go("wtime 5000 nodes 9 ponder").limits(Color::White, 0, &mut manager);
        assert_eq!(limits.time, None);
        assert_eq!(limits.nodes, Some(9));
        // The clock of the side to move: black's 10 s with movestogo 1 at ply 1, the first
        // move of the game: min((10000 − 200) / 1 · (1 + 1.8 + 0.25), 10000 − 200) = 9800.
        let (limits, budget) =
            go("wtime 1 btime 10000 movestogo 1").limits(Color::Black, 1, &mut manager);
        assert_eq!((limits.time, budget), (Some(ms(9_800)), Some(ms(9_800))));
    }
}
