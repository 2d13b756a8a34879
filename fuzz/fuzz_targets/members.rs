//! Any text: `jsonrpc::members` (a hand-written walk) answers without panicking, and
//! exactly as `serde_json` reads the text: the same verdict, names and value spans.
//! `jsonrpc::valid_members`, which trusts its text, never panics either, and on text
//! `serde_json` accepts it answers the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpx_protocol::jsonrpc::{members, valid_members};
use serde_json::value::RawValue;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ours: Option<Vec<(String, String)>> = members(text).map(|m| {
        m.into_iter()
            .map(|(k, s)| (k.into_owned(), text[s].to_owned()))
            .collect()
    });
    // serde_json's reading of the object (duplicates kept, in order).
    let theirs = reference(text);
    assert_eq!(ours, theirs, "{text:?}");
    let trusted: Option<Vec<(String, String)>> = valid_members(text).map(|m| {
        m.into_iter()
            .map(|(k, s)| (k.into_owned(), text.get(s).unwrap_or_default().to_owned()))
            .collect()
    });
    if theirs.is_some() {
        assert_eq!(trusted, theirs, "{text:?}");
    }
});

fn reference(text: &str) -> Option<Vec<(String, String)>> {
    use serde::de::{Deserializer, MapAccess, Visitor};
    struct All;
    impl<'de> Visitor<'de> for All {
        type Value = Vec<(String, String)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(k) = map.next_key::<String>()? {
                let v: &'de RawValue = map.next_value()?;
                all.push((k, v.get().to_owned()));
            }
            Ok(all)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let all = (&mut de).deserialize_map(All).ok()?;
    de.end().ok()?;
    Some(all)
}
