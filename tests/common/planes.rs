//! lc0's input planes as the encoding tests read them: the start position's piece planes and
//! helpers that encode a position spec and pick out masks and boards.

use lc0rs::chess::{EncodedPosition, HistoryFill, PositionHistory, encode_position};
use lc0rs::weights::format::InputFormat;

/// A plane with every square set.
pub const ALL: u64 = !0;
/// The first auxiliary plane (after 8 history boards of 13 planes).
pub const AUX: usize = 104;
/// The start position's 12 piece planes from white's view.
pub const START: [u64; 12] = [
    0xFF00,
    0x42,
    0x24,
    0x81,
    0x08,
    0x10,
    0x00FF << 48,
    0x42 << 56,
    0x24 << 56,
    0x81 << 56,
    0x08 << 56,
    0x10 << 56,
];

/// The planes of a position spec (`startpos moves …`, `fen …`).
pub fn encode(spec: &str, format: InputFormat, fill: HistoryFill) -> EncodedPosition {
    let history = PositionHistory::from_spec(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    encode_position(&history, format, fill)
}

/// Every plane's mask.
pub fn masks(e: &EncodedPosition) -> Vec<u64> {
    e.planes.iter().map(|p| p.mask).collect()
}

/// The 12 piece planes of history board `i`.
pub fn board(e: &EncodedPosition, i: usize) -> Vec<u64> {
    masks(e)[i * 13..i * 13 + 12].to_vec()
}
