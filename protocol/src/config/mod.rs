//! The config file every bashd program reads (DESIGN §11), as serde types: the daemon
//! takes its settings from it and `bashc` its `[remote]` and `[mcp.clients]`, through
//! the same types, so both give one answer about one file.
//!
//! A file is read in three passes: TOML syntax; the types, where every section refuses
//! an unknown key (`deny_unknown_fields`) and every value checks its own range
//! (`value.rs`); then the checks across keys and of the values' form that every reader
//! makes alike (`ConfigFile::check`: the names of built-in rules, the form of sandbox
//! paths), and the reader's own (the daemon's `~` under its `HOME`). Each error names
//! the file, the line, the key, and what to write instead.

mod effective;
mod env;
mod error;
mod hosts;
mod sections;
mod value;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use effective::{quoted, section_text};
pub use env::Env;
pub use error::{ConfigError, Refusal, bare_key};
pub use hosts::{AllowHost, AllowHosts, HostPattern, is_host_name};
pub use sections::*;
pub use value::{
    Choice, Cores, Mechanism, OnCancel, OnStraggler, Size, Strings, Text, Whole, choice,
    choice_or_unset,
};

/// The whole file; a section not written is all defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConfigFile {
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub sessions: Sessions,
    pub containment: Containment,
    pub env: Env,
    pub policy: Policy,
    pub sandbox: Sandbox,
    pub mcp: Mcp,
    pub remote: Remote,
}

impl Policy {
    /// `disable` names built-in rules only.
    fn check(&self) -> Result<(), Refusal> {
        let Some(id) = self
            .disable
            .0
            .iter()
            .find(|id| !BUILTIN_RULE_IDS.contains(&id.as_str()))
        else {
            return Ok(());
        };
        Err(Refusal::at(
            &["policy", "disable"],
            format!(
                "policy.disable names {id:?}, which is no built-in rule; built-in rules: {}",
                BUILTIN_RULE_IDS.join(", ")
            ),
        ))
    }
}

impl Sandbox {
    /// Every path is `~`, `~/...` or absolute.
    fn check(&self) -> Result<(), Refusal> {
        for (key, paths) in [
            ("writable", &self.writable),
            ("deny_read", &self.deny_read),
            ("unix_sockets", &self.unix_sockets),
        ] {
            if let Some(why) = paths.0.iter().find_map(|path| sandbox_path(path).err()) {
                return Err(Refusal::at(
                    &["sandbox", key],
                    format!("sandbox.{key}: {why}"),
                ));
            }
        }
        Ok(())
    }
}

/// `$XDG_CONFIG_HOME/bashd/config.toml`, else `~/.config/bashd/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("bashd").join("config.toml"))
}

impl ConfigFile {
    /// Loads `path`, or the default path when `None`, with the reader's own checks
    /// (`check`) after the file's; returns the file it read, `None` when a missing
    /// default file meant all defaults. A missing named file is an error.
    pub fn load_with<T>(
        path: Option<&Path>,
        check: impl FnOnce(&ConfigFile) -> Result<T, Refusal>,
    ) -> Result<(ConfigFile, T, Option<PathBuf>), ConfigError> {
        let (path, must_exist) = match path {
            Some(path) => (path.to_owned(), true),
            None => match default_path() {
                Some(path) => (path, false),
                None => return Self::defaults_with(check),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let (file, checked) = ConfigFile::parse_with(&text, &path, check)?;
                Ok((file, checked, Some(path)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
                Self::defaults_with(check)
            }
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    /// The user's file at the default path, all defaults when there is none.
    pub fn load() -> Result<ConfigFile, ConfigError> {
        Self::load_with(None, |_| Ok(())).map(|(file, (), _)| file)
    }

    fn defaults_with<T>(
        check: impl FnOnce(&ConfigFile) -> Result<T, Refusal>,
    ) -> Result<(ConfigFile, T, Option<PathBuf>), ConfigError> {
        let file = ConfigFile::default();
        let checked = check(&file).map_err(|refusal| ConfigError::Invalid {
            path: PathBuf::from("(defaults)"),
            line: 0,
            message: refusal.message,
        })?;
        Ok((file, checked, None))
    }

    /// Parses the text of a config file; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile, ConfigError> {
        Self::parse_with(text, path, |_| Ok(())).map(|(file, ())| file)
    }

    /// [`ConfigFile::parse`], then the reader's own `check`, whose refusal is placed
    /// at the line of the key it names.
    pub fn parse_with<T>(
        text: &str,
        path: &Path,
        check: impl FnOnce(&ConfigFile) -> Result<T, Refusal>,
    ) -> Result<(ConfigFile, T), ConfigError> {
        let source = error::Source { text, path };
        let (document, syntax) = toml::de::DeTable::parse_recoverable(text);
        if !syntax.is_empty() {
            return Err(source.syntax_all(&syntax));
        }
        let deserializer = toml::Deserializer::from(document.clone());
        let file = ConfigFile::deserialize(deserializer)
            .map_err(|e| every_typed(&source, &document, &e))?;
        let checked = file
            .check()
            .and_then(|()| check(&file))
            .map_err(|refusal| source.refused(document.get_ref(), refusal))?;
        Ok((file, checked))
    }

    /// What no single key's type can see: keys that contradict each other, names of
    /// built-in rules, and the form of sandbox paths. Every reader checks these, so
    /// bashc refuses a file in the daemon's words.
    fn check(&self) -> Result<(), Refusal> {
        let sandbox = &self.sandbox;
        // Only when both are written: an unset one follows the other
        // (`FrontEnd::resolve`).
        if let (Some(default), Some(floor)) = (sandbox.default, sandbox.floor)
            && default.looseness() > floor.looseness()
        {
            return Err(Refusal::at(
                &["sandbox"],
                format!(
                    "sandbox.default = \"{default}\" is looser than sandbox.floor = \"{floor}\": every job would be refused; set default to the floor or tighter",
                ),
            ));
        }
        let env = &self.env;
        if let Some((name, _)) = env.set.iter().find(|(name, _)| env.unset.contains(name)) {
            return Err(Refusal::at(
                &["env", name],
                format!("env.{name} is both set and in env.unset; keep one"),
            ));
        }
        self.policy.check()?;
        self.sandbox.check()
    }
}

/// Every key the types refuse, not only the first serde met: each key of each
/// section is read alone (a file of that one key), so a file with three bad values
/// is told three lines at once. Only on the error path: a good file is read once.
fn every_typed(
    source: &error::Source<'_>,
    document: &toml::Spanned<toml::de::DeTable<'_>>,
    first: &toml::de::Error,
) -> ConfigError {
    let alone = |section: &toml::Spanned<toml::de::DeString<'_>>,
                 value: toml::Spanned<toml::de::DeValue<'_>>| {
        let mut file = toml::de::DeTable::new();
        file.insert(section.clone(), value);
        let file = toml::Spanned::new(document.span(), file);
        ConfigFile::deserialize(toml::Deserializer::from(file))
            .err()
            .map(|e| source.typed(document.get_ref(), &e))
    };
    let mut errors = Vec::new();
    for (section, value) in document.get_ref().iter() {
        match value.get_ref() {
            toml::de::DeValue::Table(keys) if !keys.is_empty() => {
                for (key, item) in keys.iter() {
                    let mut one = toml::de::DeTable::new();
                    one.insert(key.clone(), item.clone());
                    let one = toml::Spanned::new(value.span(), toml::de::DeValue::Table(one));
                    errors.extend(alone(section, one));
                }
            }
            _ => errors.extend(alone(section, value.clone())),
        }
    }
    if errors.is_empty() {
        errors.push(source.typed(document.get_ref(), first));
    }
    ConfigError::all(errors)
}

#[cfg(test)]
mod tests;
