//! The value types of the config file: each checks its own range or spelling while
//! the file is read, so that a bad value is refused with the file's line and no
//! section has to check it again.
//!
//! Their errors are worded to follow the key's name ("must be a whole number from 1
//! to 10"): `config::error` puts `section.key` in front. A type mismatch takes its
//! words from `expecting`, so it reads the same as a value out of range.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::limits;
use crate::{Network, OnTimeout, SandboxProfile};

/// A whole number in `MIN..=MAX`, written as a TOML integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Whole<const MIN: u64, const MAX: u64>(u64);

impl<const MIN: u64, const MAX: u64> Whole<MIN, MAX> {
    /// `n`, or `None` out of range.
    pub const fn new(n: u64) -> Option<Self> {
        if n >= MIN && n <= MAX {
            Some(Whole(n))
        } else {
            None
        }
    }

    /// `n`, checked when the program is built: for the defaults.
    pub const fn at(n: u64) -> Self {
        match Self::new(n) {
            Some(whole) => whole,
            None => panic!("a default out of its own range"),
        }
    }

    pub const fn get(self) -> u64 {
        self.0
    }
}

impl<const MIN: u64, const MAX: u64> fmt::Display for Whole<MIN, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<const MIN: u64, const MAX: u64> Serialize for Whole<MIN, MAX> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Whole<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        whole(deserializer, MIN, MAX).map(Whole)
    }
}

/// A whole number in `min..=max`. The range is a value here, not a parameter of the
/// type, so that one copy of the reading code serves every range: each copy is
/// code the daemon keeps resident (docs/design/runtime.md).
fn whole<'de, D: Deserializer<'de>>(deserializer: D, min: u64, max: u64) -> Result<u64, D::Error> {
    struct Range {
        min: u64,
        max: u64,
    }
    impl Visitor<'_> for Range {
        type Value = u64;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a whole number from {} to {}", self.min, self.max)
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
            if (self.min..=self.max).contains(&n) {
                Ok(n)
            } else {
                Err(E::custom(format!("must be {}", Expecting(&self))))
            }
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
            // A negative number is out of every range here.
            self.visit_u64(u64::try_from(n).unwrap_or(u64::MAX))
        }
    }
    deserializer.deserialize_u64(Range { min, max })
}

/// What a visitor expects, as text.
struct Expecting<'v, V>(&'v V);

impl<'de, V: Visitor<'de>> fmt::Display for Expecting<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }
}

/// A type the file names by one of a few words: `"kill"`, `"background"`.
pub trait Choice: Copy + PartialEq + 'static {
    /// Every value with its word, in the order an error lists them.
    const CHOICES: &'static [(&'static str, Self)];

    fn word(self) -> &'static str {
        let found = Self::CHOICES.iter().find(|(_, value)| *value == self);
        found.map_or("?", |(word, _)| word)
    }
}

/// `#[serde(with = "choice")]` for a [`Choice`].
pub mod choice {
    use super::*;

    pub fn serialize<S: Serializer, T: Choice>(
        value: &T,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(value.word())
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Choice>(
        deserializer: D,
    ) -> Result<T, D::Error> {
        let words: Vec<&str> = T::CHOICES.iter().map(|(word, _)| *word).collect();
        let index = one_of(deserializer, &words)?;
        Ok(T::CHOICES[index].1)
    }

    /// The index of the word written in `words`: one copy for every [`Choice`].
    fn one_of<'de, D: Deserializer<'de>>(
        deserializer: D,
        words: &[&str],
    ) -> Result<usize, D::Error> {
        struct Words<'w>(&'w [&'w str]);
        impl Visitor<'_> for Words<'_> {
            type Value = usize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "one of \"{}\"", self.0.join("\", \""))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<usize, E> {
                let found = self.0.iter().position(|word| *word == text);
                found.ok_or_else(|| E::custom(format!("must be {}", Expecting(&self))))
            }
        }
        deserializer.deserialize_str(Words(words))
    }
}

/// `#[serde(with = "choice_or_unset")]` for an `Option` of a [`Choice`] whose `None`
/// means "not written" (skip it when serializing: `skip_serializing_if`).
pub mod choice_or_unset {
    use super::*;

    pub fn serialize<S: Serializer, T: Choice>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => choice::serialize(value, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Choice>(
        deserializer: D,
    ) -> Result<Option<T>, D::Error> {
        choice::deserialize(deserializer).map(Some)
    }
}

/// `mcp.on_cancel`: what a cancelled MCP `bash` call does to its job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCancel {
    /// Kill the job (`ended_by = cancel`).
    Kill,
    /// Move it to the background, as a timeout with `on_timeout = background` does.
    Background,
}

/// `sessions.on_straggler`: what happens to processes a foreground job's shell leaves
/// running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStraggler {
    /// The call returns; the survivors stay, as a background job.
    Background,
    Kill,
}

/// `containment.mechanism`: what holds a job's processes together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mechanism {
    /// A per-job resident, in a cgroup of its own when one can be made: what holds.
    #[default]
    Auto,
    /// Process group and cookie only: what a job can shed (`env -i setsid`). For
    /// comparison, and for a system without `bashd-resident`.
    Scan,
}

impl Choice for OnCancel {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("kill", OnCancel::Kill),
        ("background", OnCancel::Background),
    ];
}

impl Choice for OnStraggler {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("background", OnStraggler::Background),
        ("kill", OnStraggler::Kill),
    ];
}

impl Choice for OnTimeout {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("background", OnTimeout::Background),
        ("kill", OnTimeout::Kill),
    ];
}

impl Choice for Mechanism {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("auto", Mechanism::Auto), ("scan", Mechanism::Scan)];
}

impl Choice for SandboxProfile {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("off", SandboxProfile::Off),
        ("workspace-write", SandboxProfile::WorkspaceWrite),
        ("read-only", SandboxProfile::ReadOnly),
    ];
}

impl Choice for Network {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("on", Network::On),
        ("allow-list", Network::AllowList),
        ("off", Network::Off),
    ];
}

/// A job's memory limit as people write it (`"2G"`, `1073741824`), in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

/// A job's CPU limit as people write it (`1.5`, `"0.5"`, `2`), in thousandths of a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cores(pub u32);

/// Reads a string, integer or float as the text a person wrote, for the parsers the
/// command line shares; anything else becomes text no such parser takes.
fn scalar_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    struct Text;
    impl Visitor<'_> for Text {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or a number")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<String, E> {
            Ok(text.to_owned())
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> Result<String, E> {
            Ok(n.to_string())
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> Result<String, E> {
            Ok(n.to_string())
        }

        fn visit_f64<E: de::Error>(self, n: f64) -> Result<String, E> {
            Ok(n.to_string())
        }
    }
    deserializer.deserialize_any(Text)
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0.to_string())
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = scalar_text(deserializer)?;
        limits::parse_size(&text)
            .map(Size)
            .map_err(|e| de::Error::custom(format!(": {e}")))
    }
}

impl Serialize for Cores {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(f64::from(self.0) / 1000.0)
    }
}

impl<'de> Deserialize<'de> for Cores {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = scalar_text(deserializer)?;
        limits::parse_cpu(&text)
            .map(Cores)
            .map_err(|e| de::Error::custom(format!(": {e}")))
    }
}

/// A list of strings, `["a", "b"]`; one wording for a list that is not one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Strings(pub Vec<String>);

const STRINGS: &str = "a list of strings, like [\"a\", \"b\"]";

impl<'de> Deserialize<'de> for Strings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// One item; `None` when it is not a string.
        struct Item(Option<String>);
        impl<'de> Deserialize<'de> for Item {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer)
                    .map(|s| Item(Some(s)))
                    .or(Ok(Item(None)))
            }
        }
        struct List;
        impl<'de> Visitor<'de> for List {
            type Value = Strings;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(STRINGS)
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut items: A) -> Result<Strings, A::Error> {
                let mut list = Vec::new();
                while let Some(Item(item)) = items.next_element()? {
                    let item =
                        item.ok_or_else(|| de::Error::custom(format!("must be {STRINGS}")))?;
                    list.push(item);
                }
                Ok(Strings(list))
            }
        }
        deserializer.deserialize_seq(List)
    }
}

/// A string with something in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NonEmpty;
        impl Visitor<'_> for NonEmpty {
            type Value = Text;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-empty string")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
                if text.is_empty() {
                    return Err(E::custom(format!("must be {}", Expecting(&self))));
                }
                Ok(Text(text.to_owned()))
            }
        }
        deserializer.deserialize_str(NonEmpty)
    }
}
