//! lc0-style backend options: `key=value,key2=value2`. Every key must be taken by the backend;
//! a key it does not know is an error, not silently ignored. A list value continues over the
//! items without `=` that follow it: `gpus=0,1,max_batch=64` gives `gpus` the value `0,1`.

use std::cell::RefCell;
use std::str::FromStr;

use super::BackendError;

/// Parsed options; each backend takes the keys it knows and then calls [`BackendOptions::finish`].
#[derive(Debug, Default)]
pub struct BackendOptions {
    entries: Vec<(String, String)>,
    taken: RefCell<Vec<String>>,
}

impl BackendOptions {
    /// Parses `key=value,key2=value2` (spaces around items are ignored; empty is no options);
    /// an item without `=` after the first is one more element of the previous value's list.
    pub fn parse(text: &str) -> Result<Self, BackendError> {
        let syntax = |reason: String| BackendError::OptionSyntax {
            text: text.to_owned(),
            reason,
        };
        let mut entries: Vec<(String, String)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                let (_, list) = entries
                    .last_mut()
                    .ok_or_else(|| syntax(format!("{item:?} is not key=value")))?;
                if item.contains(['(', ')']) {
                    return Err(syntax(format!(
                        "{item:?}: nested option groups are not supported"
                    )));
                }
                list.push(',');
                list.push_str(item);
                continue;
            };
            let key = key.trim();
            if key.is_empty() {
                return Err(syntax(format!("{item:?} has no key before `=`")));
            }
            if key.contains(['(', ')']) || value.contains(['(', ')']) {
                return Err(syntax(format!(
                    "{item:?}: nested option groups are not supported"
                )));
            }
            if entries.iter().any(|(k, _)| k == key) {
                return Err(syntax(format!("{key:?} is given twice")));
            }
            entries.push((key.to_owned(), value.trim().to_owned()));
        }
        Ok(Self {
            entries,
            taken: RefCell::default(),
        })
    }

    /// Takes option `key`, parsed as `T`; `None` when absent.
    pub fn get<T: FromStr>(&self, backend: &str, key: &str) -> Result<Option<T>, BackendError>
    where
        T::Err: std::fmt::Display,
    {
        self.taken.borrow_mut().push(key.to_owned());
        let Some((_, value)) = self.entries.iter().find(|(k, _)| k == key) else {
            return Ok(None);
        };
        value
            .parse()
            .map(Some)
            .map_err(|e: T::Err| BackendError::BadOption {
                backend: backend.to_owned(),
                key: key.to_owned(),
                value: value.clone(),
                reason: e.to_string(),
            })
    }

    /// Applies `policy_head` / `value_head` (lc0's names) to the network, if given.
    pub fn select_heads(
        &self,
        backend: &str,
        network: &mut crate::weights::Network,
    ) -> Result<(), BackendError> {
        let policy = self.get::<String>(backend, "policy_head")?;
        let value = self.get::<String>(backend, "value_head")?;
        if policy.is_none() && value.is_none() {
            return Ok(());
        }
        let policy = policy.unwrap_or_else(|| network.policy_head_name().to_owned());
        let value = value.unwrap_or_else(|| network.value_head_name().to_owned());
        network
            .select_heads(&policy, &value)
            .map_err(|error| BackendError::Network {
                backend: backend.to_owned(),
                error,
            })
    }

    /// Takes `policy_head` / `value_head` for a residual-tower network, which has only lc0's
    /// "vanilla" and "winner" heads.
    pub fn check_tower_heads(&self, backend: &str) -> Result<(), BackendError> {
        use crate::weights::tower::{POLICY_HEAD_NAME, TowerNetwork, VALUE_HEAD_NAME};
        let policy = self.get::<String>(backend, "policy_head")?;
        let value = self.get::<String>(backend, "value_head")?;
        TowerNetwork::check_heads(
            policy.as_deref().unwrap_or(POLICY_HEAD_NAME),
            value.as_deref().unwrap_or(VALUE_HEAD_NAME),
        )
        .map_err(|error| BackendError::Network {
            backend: backend.to_owned(),
            error,
        })
    }

    /// Fails on any option the backend did not take.
    pub fn finish(&self, backend: &str) -> Result<(), BackendError> {
        let taken = self.taken.borrow();
        match self.entries.iter().find(|(k, _)| !taken.contains(k)) {
            None => Ok(()),
            Some((key, _)) => Err(BackendError::UnknownOption {
                backend: backend.to_owned(),
                key: key.clone(),
                known: taken.join(", "),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_keys() {
        let o = BackendOptions::parse(" threads=2 , max_batch=64").unwrap();
        assert_eq!(o.get::<usize>("cpu", "threads").unwrap(), Some(2));
        assert_eq!(o.get::<usize>("cpu", "gpu").unwrap(), None);
        assert!(
            matches!(o.finish("cpu"), Err(BackendError::UnknownOption { key, .. }) if key == "max_batch")
        );
        assert_eq!(o.get::<usize>("cpu", "max_batch").unwrap(), Some(64));
        assert!(o.finish("cpu").is_ok());
    }

    #[test]
    fn a_list_value_runs_to_the_next_key() {
        let o = BackendOptions::parse("gpus=0, 2 ,3,max_batch=64,lanes=1").unwrap();
        assert_eq!(
            o.get::<String>("cuda-fp16", "gpus").unwrap().unwrap(),
            "0,2,3"
        );
        assert_eq!(o.get::<usize>("cuda-fp16", "max_batch").unwrap(), Some(64));
        assert_eq!(o.get::<usize>("cuda-fp16", "lanes").unwrap(), Some(1));
        let o = BackendOptions::parse("threads=2,4").unwrap();
        let err = o.get::<usize>("cpu", "threads").unwrap_err().to_string();
        assert!(err.contains("2,4"), "{err}");
    }

    #[test]
    fn bad_syntax_and_values() {
        assert!(BackendOptions::parse("threads").is_err());
        assert!(BackendOptions::parse("threads,gpus=1").is_err());
        assert!(BackendOptions::parse("gpus=0,(gpu=1)").is_err());
        assert!(BackendOptions::parse("a=1,a=2").is_err());
        assert!(BackendOptions::parse("cuda(gpu=1)").is_err());
        assert!(BackendOptions::parse("").unwrap().finish("cpu").is_ok());
        let o = BackendOptions::parse("threads=many").unwrap();
        let err = o.get::<usize>("cpu", "threads").unwrap_err().to_string();
        assert!(err.contains("threads") && err.contains("many"), "{err}");
    }
}
