//! lc0rs-cli: the `lc0rs` command line, above the library (`lc0rs`) and the engine
//! (`lc0rs-engine`). `main.rs` parses the arguments; [`commands`] holds one function per command
//! and [`charts`] the profile's SVG charts (`backendbench --plot`, `--roofline`).

pub mod charts;
pub mod commands;
