//! A TLS front for tests: it accepts TLS on `127.0.0.1`, presenting a certificate for
//! `127.0.0.1` (and `localhost`) that a certificate authority of its own signed, and
//! forwards each connection's bytes to a plain TCP port on `127.0.0.1`. Put in front of
//! `mcpx example-server --http`, it makes an `https://` upstream; a process trusts it
//! when `SSL_CERT_FILE` names a file holding [`TlsFront::ca_pem`].

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// A running front; it stops when dropped.
#[derive(Debug)]
pub struct TlsFront {
    /// The port it accepts TLS on, at `127.0.0.1`.
    pub port: u16,
    /// Its certificate authority's certificate, PEM.
    pub ca_pem: String,
    accept: JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// A certificate authority: its certificate (PEM) and what signs with it.
fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("CA params: {e}"));
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap_or_else(|e| panic!("CA key: {e}"));
    CertifiedIssuer::self_signed(params, key).unwrap_or_else(|e| panic!("CA: {e}"))
}

/// The certificate of an authority that signed nothing a front serves: trusting only
/// it, a client must refuse every front.
pub fn unrelated_ca_pem() -> String {
    authority("mcpx tests: an unrelated CA").pem()
}

/// A server identity for `127.0.0.1` (and `localhost`), signed by a certificate
/// authority of its own, all PEM.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The authority's certificate: what a client must trust.
    pub ca_pem: String,
    /// The server's certificate.
    pub cert_pem: String,
    /// The server's private key (PKCS #8).
    pub key_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

impl Identity {
    /// A new one.
    pub fn new() -> Identity {
        let ca = authority("mcpx tests CA");
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("key: {e}"));
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap_or_else(|e| panic!("params: {e}"));
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let cert = params
            .signed_by(&key, &ca)
            .unwrap_or_else(|e| panic!("certificate: {e}"));
        Identity {
            ca_pem: ca.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
        }
    }
}

impl Default for Identity {
    fn default() -> Self {
        Identity::new()
    }
}

impl TlsFront {
    /// A front forwarding to `127.0.0.1:backend`.
    pub async fn start(backend: u16) -> TlsFront {
        let id = Identity::new();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth().with_single_cert(
                    vec![id.cert_der.clone().into()],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(id.key_der.clone())),
                )
            })
            .unwrap_or_else(|e| panic!("TLS server config: {e}"));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let (listener, port) = crate::loopback_listener().await;
        let accept = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here, as it should.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(("127.0.0.1", backend)).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        TlsFront {
            port,
            ca_pem: id.ca_pem,
            accept,
        }
    }
}
