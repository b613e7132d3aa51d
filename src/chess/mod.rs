//! Chess for the network: positions with their history (rules from shakmaty, FENs, castling
//! rights and en-passant flags as lc0 reads and keeps them), the 112 input planes in every lc0
//! input format, the canonicalising board transforms, and the move ↔ policy-index maps
//! (docs/lc0-format.md §2).

pub mod castling;
pub mod conv_policy_map;
pub mod encoder;
pub mod fen;
pub mod history;
pub mod opposite_check;
pub mod policy_index;
pub mod transform;

pub use castling::Castling;
pub use encoder::{EncodedPosition, HistoryFill, InputPlane, InputPlanes, encode_position};
pub use fen::{FenError, Lc0Fen};
pub use history::{ChessError, PositionHistory};
pub use transform::Transform;
