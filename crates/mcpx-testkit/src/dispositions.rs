//! The dispositions registry (`dispositions.toml`) decoded for the tests.

use mcpx_protocol::dispositions::{self, Disposition, Registry, RegistryError};

/// A registry that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DispositionsError {
    /// The text is not a registry file.
    #[error("dispositions registry: {0}")]
    Decode(#[from] toml::de::Error),
    /// Its items break the registry's rules.
    #[error(transparent)]
    Check(#[from] RegistryError),
}

/// Parses registry text and checks its items.
pub fn parse(text: &str) -> Result<Vec<Disposition>, DispositionsError> {
    let registry: Registry = toml::from_str(text)?;
    Ok(dispositions::check(registry)?)
}

/// The registry built into mcpx.
pub fn registry() -> Result<Vec<Disposition>, DispositionsError> {
    parse(dispositions::REGISTRY_TOML)
}
