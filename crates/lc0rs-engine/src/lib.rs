//! lc0rs-engine: the chess engine over an lc0rs backend, the layer above the library `lc0rs`.
//!
//! [`search`] is the MCTS (tree, lc0's minibatch gathering, search threads, NN cache, time
//! manager) and [`uci`] the UCI protocol that drives it. The command line (`lc0rs-cli`) runs
//! [`uci::run`] for `lc0rs uci`.

pub mod search;
pub mod uci;
