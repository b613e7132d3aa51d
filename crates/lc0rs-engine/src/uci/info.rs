//! The `info` lines a search writes, in lc0's order and format.

use std::fmt::Write as _;

use super::score::{ScoreType, line_score, shown};
use crate::search::stats::MoveStats;
use crate::search::{SearchInfo, uci};

/// What the options ask the `info` lines to show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoStyle {
    /// UCI_ShowWDL: `wdl W D L` per mille.
    pub show_wdl: bool,
    /// VerboseMoveStats: an `info string` per root move after the search.
    pub verbose_move_stats: bool,
    /// ScoreType: what `score cp` shows (see [`super::score`]).
    pub score_type: ScoreType,
    /// Whether the network has a WDL head (`WDL_mu` needs one); set for each search.
    pub has_wdl: bool,
}

/// `info depth .. seldepth .. time .. nodes .. score cp|mate .. [wdl ..] hashfull .. nps ..
/// tbhits 0 [multipv i] pv ..`, one line per MultiPV line (`multipv` shown whenever MultiPV
/// above 1 was asked), as lc0 writes them, each line's score as ScoreType asks.
pub fn info_lines(info: &SearchInfo, style: InfoStyle) -> Vec<String> {
    let common = format!(
        "info depth {} seldepth {} time {} nodes {}",
        info.depth.max(1),
        info.seldepth,
        info.elapsed.as_millis(),
        info.nodes,
    );
    let counters = format!("hashfull {} nps {} tbhits 0", info.hashfull, info.nps());
    if info.lines.is_empty() {
        // No root move has a value yet: the root's Q, without a D.
        let value = shown(info.q, 0.0, info.mate, style.score_type, style.has_wdl);
        return vec![format!("{common} score {} {counters}", value.score)];
    }
    info.lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let value = line_score(line, style.score_type, style.has_wdl);
            let mut text = format!("{common} score {}", value.score);
            if style.show_wdl {
                let [w, d, l] = value.wdl;
                let _ = write!(text, " wdl {w} {d} {l}");
            }
            let _ = write!(text, " {counters}");
            if info.numbered_lines {
                let _ = write!(text, " multipv {}", i + 1);
            }
            let pv: Vec<String> = line.pv.iter().map(|m| uci(m, info.chess960)).collect();
            let _ = write!(text, " pv {}", pv.join(" "));
            text
        })
        .collect()
}

/// `info currmove M currmovenumber N` for the best move so far (its place in policy order):
/// the move the search spends most of its playouts on.
pub fn currmove_line(info: &SearchInfo) -> Option<String> {
    let line = info.lines.first()?;
    let m = line.pv.first()?;
    Some(format!(
        "info currmove {} currmovenumber {}",
        uci(m, info.chess960),
        line.move_number
    ))
}

/// lc0's VerboseMoveStats lines: per root move (the least promising first) its move, policy
/// index, visits, in-flight visits, prior, W − L, D, Q, U, S = Q + U, the network's value V
/// where the NN cache holds it, and `(T)` where its result is proven. Moves left (M), which
/// lc0rs does not keep per node, is printed as lc0 prints an unknown value.
pub fn verbose_move_stats(stats: &[(MoveStats, usize)], chess960: bool) -> Vec<String> {
    stats
        .iter()
        .map(|(s, index)| {
            let mut line = format!(
                "info string {:<5} ({:<4}) N: {:>7} (+{:>2}) (P: {:>5.*}%) ",
                uci(&s.mv, chess960),
                index,
                s.visits,
                s.in_flight,
                if s.prior >= 0.999_95 { 1 } else { 2 },
                s.prior * 100.0,
            );
            match s.draw {
                Some(d) => {
                    let _ = write!(
                        line,
                        "(WL: {:>8.5}) (D: {d:>5.3}) (M:  -.-) (Q: {:>8.5}) ",
                        s.q, s.q
                    );
                }
                None => {
                    let _ = write!(
                        line,
                        "(WL:  -.-----) (D: -.---) (M:  -.-) (Q: {:>8.5}) ",
                        s.q
                    );
                }
            }
            let _ = write!(line, "(U: {:>6.5}) (S: {:>8.5}) ", s.u, s.score);
            match s.network_value {
                Some(v) => {
                    let _ = write!(line, "(V: {v:>7.4}) ");
                }
                None => line.push_str("(V:  -.----) "),
            }
            if s.proof.is_some() {
                line.push_str("(T) ");
            }
            line.trim_end().to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::PvLine;
    use shakmaty::{Chess, Position};
    use std::time::Duration;

    fn sample() -> SearchInfo {
        let position = Chess::default();
        let moves: Vec<_> = position.legal_moves().into_iter().take(2).collect();
        let line = |m, q, mate| PvLine {
            pv: vec![m],
            visits: 10,
            q,
            wdl: [0.5, 0.3, 0.2],
            mate,
            move_number: 4,
        };
        SearchInfo {
            depth: 0,
            seldepth: 3,
            nodes: 200,
            playouts: 200,
            elapsed: Duration::from_millis(100),
            q: 0.3,
            mate: None,
            pv: vec![moves[0]],
            lines: vec![line(moves[0], 0.3, None), line(moves[1], -1.0, Some(-2))],
            hashfull: 12,
            chess960: false,
            numbered_lines: true,
            collisions: 0,
            walks: 0,
            shared_walks: 0,
            batches: 0,
            evaluated: 0,
            times: Default::default(),
        }
    }

    #[test]
    fn lines_follow_lc0s_order() {
        let info = sample();
        let style = InfoStyle {
            show_wdl: true,
            verbose_move_stats: false,
            score_type: ScoreType::Centipawn,
            has_wdl: true,
        };
        let lines = info_lines(&info, style);
        let first = uci(&info.lines[0].pv[0], false);
        // 90·tan(1.5637541897·0.3) = 45.62 → 45 (truncated, as lc0 does); W = 500·(1 + 0.3 −
        // 0.3) = 500, L = 500·(1 − 0.3 − 0.3) = 200, D = 300.
        assert_eq!(
            lines[0],
            format!(
                "info depth 1 seldepth 3 time 100 nodes 200 score cp 45 wdl 500 300 200 hashfull 12 nps 2000 tbhits 0 multipv 1 pv {first}"
            )
        );
        // The default, WDL_mu: W 0.5, L 0.2 give μ = (ln 4 − ln 1)/(ln 4 + ln 1) = 1, not below
        // 1, and the fallback 45·tan(1.56728071628·0.3) = 22.87 is smaller: 100·μ. Without a
        // WDL head the fallback, 22.
        let wdl_mu = InfoStyle {
            has_wdl: true,
            ..InfoStyle::default()
        };
        assert!(info_lines(&info, wdl_mu)[0].contains(" score cp 100 hashfull "));
        assert!(info_lines(&info, InfoStyle::default())[0].contains(" score cp 22 hashfull "));
        assert!(lines[1].contains(" score mate -2 wdl "), "{}", lines[1]);
        assert!(lines[1].contains(" multipv 2 pv "), "{}", lines[1]);
        let one_line = SearchInfo {
            lines: info.lines[..1].to_vec(),
            ..info.clone()
        };
        // MultiPV 3 asked, one legal move: the one line is still numbered, as lc0 numbers it.
        let numbered = info_lines(&one_line, InfoStyle::default());
        assert!(numbered[0].contains(" multipv 1 pv "), "{}", numbered[0]);
        let plain = info_lines(
            &SearchInfo {
                numbered_lines: false,
                ..one_line
            },
            InfoStyle::default(),
        );
        assert!(!plain[0].contains("multipv") && !plain[0].contains("wdl"));
        assert_eq!(
            currmove_line(&info).unwrap(),
            format!("info currmove {first} currmovenumber 4")
        );
    }
}
