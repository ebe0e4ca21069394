//! `[env]`: variables set in every job over the hardening set, `unset`, which removes
//! some of the set, and `pass`, the agent's credentials `bashc mcp` lets into jobs.
//! Its keys are the user's variable names, so it has no fixed fields.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use super::value::Strings;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    /// Variables added to the hardening set or overriding one, in the file's order.
    pub set: Vec<(String, String)>,
    /// Variables removed from the hardening set: the only way to loosen it, so that a
    /// copied example naming a few variables does not drop the others.
    pub unset: Vec<String>,
    /// The agent's own credentials that `bashc mcp` passes into jobs all the same (it
    /// keeps them out by default).
    pub pass: Vec<String>,
}

/// The value of a variable: a string.
struct Value(String);

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Value;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string (`unset = [\"NAME\"]` removes a variable)")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
                Ok(Value(text.to_owned()))
            }
        }
        deserializer.deserialize_str(Text)
    }
}

impl<'de> Deserialize<'de> for Env {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Section;
        impl<'de> Visitor<'de> for Section {
            type Value = Env;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a section ([env])")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Env, M::Error> {
                let mut env = Env::default();
                while let Some(name) = map.next_key::<String>()? {
                    match name.as_str() {
                        "unset" => env.unset = map.next_value::<Strings>()?.0,
                        "pass" => env.pass = map.next_value::<Strings>()?.0,
                        _ => {
                            let Value(value) = map.next_value()?;
                            if name.is_empty() || name.contains(['=', '\0']) {
                                return Err(de::Error::custom(format!(
                                    ": {name:?} is not a variable name"
                                )));
                            }
                            env.set.push((name, value));
                        }
                    }
                }
                Ok(env)
            }
        }
        deserializer.deserialize_map(Section)
    }
}
