//! A loaded network of either body lc0 runs: an attention body or a residual tower.

use super::format::NetFormat;
use super::network::Network;
use super::tower::TowerNetwork;

/// What a weights file holds, after lc0's fix-ups and all checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    Attention(Network),
    Residual(TowerNetwork),
}

impl Model {
    pub fn format(&self) -> &NetFormat {
        match self {
            Self::Attention(n) => &n.format,
            Self::Residual(n) => &n.format,
        }
    }

    /// The attention-body network, if that is what this is.
    pub fn into_attention(self) -> Option<Network> {
        match self {
            Self::Attention(n) => Some(n),
            Self::Residual(_) => None,
        }
    }
}

impl From<Network> for Model {
    fn from(network: Network) -> Self {
        Self::Attention(network)
    }
}

impl From<TowerNetwork> for Model {
    fn from(network: TowerNetwork) -> Self {
        Self::Residual(network)
    }
}
