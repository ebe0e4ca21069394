//! The config in force as TOML that loads to the same settings (`bashd --check-config`),
//! made from the section types: every key of a section is shown, in the order of its
//! fields, marked `# default: ...` where it differs from the default; a key with no
//! value (no default) is shown as `# key: none`.

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, Visitor};

/// `text` as a TOML string.
pub fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `[name]` and its keys, `value` against `default`; `none_note(key)` adds words to a
/// key with no value (what happens then). A table within the section (`[mcp.clients]`)
/// is not serialized with it, and is left to the caller.
pub fn section_text<T>(
    name: &str,
    value: &T,
    default: &T,
    none_note: &dyn Fn(&str) -> Option<&'static str>,
) -> String
where
    T: Serialize + for<'de> Deserialize<'de>,
{
    let table = |section: &T| {
        toml::Table::try_from(section).expect("a section serializes to a table: its fields are")
    };
    table_text(
        name,
        &table(value),
        &table(default),
        fields::<T>(),
        none_note,
    )
}

/// [`section_text`] past the part that depends on the section's type: one copy for
/// every section.
fn table_text(
    name: &str,
    value: &toml::Table,
    default: &toml::Table,
    fields: &[&str],
    none_note: &dyn Fn(&str) -> Option<&'static str>,
) -> String {
    let mut out = format!("[{name}]\n");
    for field in fields {
        if TABLES_OF_THEIR_OWN.contains(field) {
            continue;
        }
        match value.get(*field) {
            Some(now) => {
                out.push_str(&format!("{field} = {now}"));
                match default.get(*field) {
                    Some(was) if was == now => {}
                    Some(was) => out.push_str(&format!("  # default: {was}")),
                    None => out.push_str("  # default: none"),
                }
                out.push('\n');
            }
            None => {
                let note = none_note(field)
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                out.push_str(&format!("# {field}: none{note}\n"));
            }
        }
    }
    out
}

/// Keys whose value is a table of sections of its own, shown after their section.
const TABLES_OF_THEIR_OWN: &[&str] = &["clients"];

/// The field names of a struct that derives `Deserialize`, in their order: what the
/// derive hands `deserialize_struct`.
fn fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Fields<'a>(&'a mut &'static [&'static str]);

    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fields read")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }

    impl<'de> Deserializer<'de> for Fields<'_> {
        type Error = Stop;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            *self.0 = fields;
            Err(Stop)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let mut found: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut found));
    found
}
