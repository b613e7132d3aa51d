//! The sizes lc0's board encoding fixes (docs/lc0-format.md §2): squares, input planes and
//! policy outputs. The network reader, the chess encoding and every backend check shapes against
//! them, so they live here, at the bottom of the import order (this module imports nothing).

/// Squares on the board: the values of a plane, the tokens of a position in an attention body.
pub const SQUARES: usize = 64;
/// Input planes per position: 8 history boards of 13 planes, then 8 auxiliary planes.
pub const INPUT_PLANES: usize = 112;
/// Outputs of the policy head: lc0's 1858 moves.
pub const POLICY_SIZE: usize = 1858;
/// Raw outputs of the attention policy: 64×64 from-to logits, then 8×8×3 promotions.
pub const ATTENTION_POLICY_SIZE: usize = SQUARES * SQUARES + 8 * 24;
/// Output planes of the convolution policy head (lc0 nets have 80, of which 73 are read).
pub const CONV_POLICY_PLANES: usize = 80;
/// Planes lc0's convolution policy map reads.
pub const CONV_POLICY_USED_PLANES: usize = 73;
