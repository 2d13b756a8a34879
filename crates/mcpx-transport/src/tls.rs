//! TLS for `https://` upstreams (and the OTLP exporter's collector): rustls, trusting
//! the system's root certificates.
//!
//! The roots are what `rustls-native-certs` finds: the platform's store (on Linux the
//! usual bundle files and directories), or the PEM bundle `SSL_CERT_FILE` names and the
//! directory `SSL_CERT_DIR` names when either is set, as OpenSSL-based tools read
//! them. They are loaded once, at the first `https://` connection, and kept for the
//! process's life. A connection offers ALPN `http/1.1` only (the client speaks
//! HTTP/1.1) and checks the server's certificate against the URL's host, a DNS name or
//! an IP address.

use std::sync::{Arc, LazyLock};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

// Result<_, String> here: the words are all a caller uses, in the TransportError of
// the connection that needed TLS.
/// The client configuration every `https://` connection shares, or why there is none.
static CONFIG: LazyLock<Result<Arc<ClientConfig>, String>> = LazyLock::new(config);

fn config() -> Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(format!(
            "no trusted root certificates were found{}; set SSL_CERT_FILE to a PEM bundle",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

// Result<_, String>: as `config`.
/// TLS over `tcp`, to `host` (the URL's: a DNS name, or an IP address without
/// brackets), its certificate checked against it.
pub async fn connect(host: &str, tcp: TcpStream) -> Result<TlsStream<TcpStream>, String> {
    let config = CONFIG.as_ref().map_err(Clone::clone)?;
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| format!("TLS: {host:?} is not a host name a certificate can name: {e}"))?;
    TlsConnector::from(Arc::clone(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {host}: {e}"))
}
