//! Shared by the property tests: generated JSON values.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::Value;

/// proptest's configuration with `cases` cases. Failures are kept beside the test's
/// source file (`<file>.proptest-regressions`): proptest's default would put them under
/// `tests/proptest-regressions/`, as these files sit beside the binary's `main.rs`.
pub fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::with_cases(cases)
    }
}

/// Any JSON value, up to 5 levels deep: strings matching `strings`, object keys
/// matching `keys` (regular expressions, as proptest reads them).
pub fn json_value(strings: &'static str, keys: &'static str) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        strings.prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
