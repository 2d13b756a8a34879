//! Captured content made safe to keep: the values of secret-looking keys blanked, at
//! any depth, and the text capped.

use serde_json::Value;

/// What a redacted value becomes.
pub const REDACTED: &str = "[redacted]";

/// The keys redacted by default (`mcpx.history.redact`).
pub const DEFAULT_PATTERNS: [&str; 5] = ["token", "secret", "password", "authorization", "api_key"];

/// Which keys to blank: a key is redacted when, lower-cased and with `_` and `-`
/// taken out, it contains a pattern so written. So `api_key` covers `apiKey`,
/// `API-KEY` and `x_api_key`, and `token` covers `accessToken` and `GITHUB_TOKEN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redactor {
    patterns: Vec<String>,
}

impl Default for Redactor {
    fn default() -> Self {
        Redactor::new(DEFAULT_PATTERNS)
    }
}

/// `s` lower-cased, without `_` and `-`.
fn fold(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

impl Redactor {
    /// A redactor of keys matching any of `patterns`.
    pub fn new<S: AsRef<str>>(patterns: impl IntoIterator<Item = S>) -> Redactor {
        Redactor {
            patterns: patterns
                .into_iter()
                .map(|p| fold(p.as_ref()))
                .filter(|p| !p.is_empty())
                .collect(),
        }
    }

    /// Whether `key`'s value is blanked.
    pub fn matches(&self, key: &str) -> bool {
        let key = fold(key);
        self.patterns.iter().any(|p| key.contains(p.as_str()))
    }

    /// Blanks, in place, the value of every matching key at any depth.
    pub fn apply(&self, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, val) in map.iter_mut() {
                    if self.matches(k) {
                        *val = Value::String(REDACTED.to_owned());
                    } else {
                        self.apply(val);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.apply(i)),
            _ => {}
        }
    }

    /// `text` (JSON) redacted and capped at `max_bytes`: past the cap, an object
    /// `{"mcpx/truncated": BYTES, "head": "…"}` that keeps the first bytes of the
    /// redacted text. Text that is not JSON is kept only as its size, since it cannot
    /// be redacted.
    pub fn keep(&self, text: &str, max_bytes: usize) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(text) else {
            return serde_json::json!({ "mcpx/unreadable": text.len() }).to_string();
        };
        self.apply(&mut v);
        let out = v.to_string();
        if out.len() <= max_bytes {
            return out;
        }
        let mut cut = max_bytes.min(out.len());
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        serde_json::json!({ "mcpx/truncated": out.len(), "head": &out[..cut] }).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_secret_keys_are_blanked_in_every_case() {
        let r = Redactor::default();
        let kept = r.keep(
            &json!({
                "query": "weather",
                "auth": {"accessToken": "t1", "nested": [{"API_KEY": "k", "x-Api-Key": "k2"}]},
                "Password": "p",
                "headers": {"Authorization": "Bearer x"},
                "clientSecret": "s",
                "tokens": ["a", "b"],
            })
            .to_string(),
            1 << 20,
        );
        let v: Value = serde_json::from_str(&kept).unwrap();
        assert_eq!(v["query"], "weather");
        assert_eq!(v["auth"]["accessToken"], REDACTED);
        assert_eq!(v["auth"]["nested"][0]["API_KEY"], REDACTED);
        assert_eq!(v["auth"]["nested"][0]["x-Api-Key"], REDACTED);
        assert_eq!(v["Password"], REDACTED);
        assert_eq!(v["headers"]["Authorization"], REDACTED);
        assert_eq!(v["clientSecret"], REDACTED);
        assert_eq!(v["tokens"], REDACTED);
        assert!(!kept.contains("Bearer x") && !kept.contains("\"t1\""));
    }

    #[test]
    fn past_the_cap_the_head_is_kept_and_the_size_said() {
        let r = Redactor::new(["pin"]);
        let text = json!({"a_pin": "1234", "long": "é".repeat(100)}).to_string();
        let kept: Value = serde_json::from_str(&r.keep(&text, 31)).unwrap();
        assert!(kept["mcpx/truncated"].as_u64().unwrap() > 31);
        let head = kept["head"].as_str().unwrap();
        assert!(head.len() <= 31 && head.contains(REDACTED), "{head}");
        assert_eq!(
            r.keep("not json", 100),
            json!({"mcpx/unreadable": 8}).to_string()
        );
    }
}
