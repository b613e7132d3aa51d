//! Chess for the network: positions with their history (rules from shakmaty), the 112 input
//! planes in every lc0 input format, the canonicalising board transforms, and the move ↔
//! policy-index maps (lc0-network.md §2).

pub mod encoder;
pub mod history;
pub mod policy_index;
pub mod transform;

pub use encoder::{EncodedPosition, HistoryFill, InputPlane, InputPlanes, encode_position};
pub use history::{ChessError, PositionHistory};
pub use transform::Transform;
