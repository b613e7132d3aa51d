//! lc0rs: a neural backend for Leela Chess Zero attention-body ("transformer") networks.
//!
//! The crate is split the way lc0 splits it: [`weights`] holds the network description loaded
//! from a weights file, [`netgen`] writes valid weights files with random weights for testing
//! and benchmarking, and [`netsource`] resolves `-w` (a file, `preset:NAME`, or the bundled net).

pub mod backend;
pub mod board;
pub mod chess;
pub mod evaluate;
pub mod gpu;
pub mod netgen;
pub mod netsource;
pub mod profile;
pub mod rescore;
pub mod weights;
