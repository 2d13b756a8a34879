//! The callback listener of an authorization-code login (issue #39), over real
//! sockets: a login under way (`begin_login`, then `finish`, as `mcpx auth login` and
//! `mcpx serve`'s URL elicitation run it) against a scripted authorization server on
//! 127.0.0.1, its listener sent forged redirects, other paths and methods, idle and
//! half-sent connections, and then the real redirect, which completes the login.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::future::Future;
use std::time::Duration;

use mcpx_testkit::http::{Answer, ScriptedHttp};
use mcpx_transport::TransportError;
use mcpx_transport::oauth::code::{Begun, Http, PendingLogin, UserAuth, begin_login};
use mcpx_transport::oauth::store::TokenRecord;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use url::Url;

/// The most any one step of these tests waits.
const STEP: Duration = Duration::from_secs(10);

/// `f`, or a panic naming `what` after [`STEP`].
async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within {STEP:?}"))
}

/// A login waiting for its redirect.
struct Login {
    /// The authorization server (and upstream: a 2025-03-26 one, its endpoints the
    /// defaults); it gives `at-1` for the code `the-code`.
    server: ScriptedHttp,
    /// The callback listener's port.
    port: u16,
    /// The `state` the authorization URL carries.
    state: String,
    /// The login's end.
    finish: JoinHandle<Result<TokenRecord, TransportError>>,
}

impl Login {
    async fn start(name: &str) -> Login {
        let server = ScriptedHttp::start(|r| {
            if r.line().starts_with("POST /token ") {
                if r.body.split('&').any(|p| p == "code=the-code") {
                    Answer::json(
                        "200 OK",
                        &json!({"access_token": "at-1", "token_type": "Bearer", "expires_in": 3600}),
                    )
                } else {
                    Answer::json("400 Bad Request", &json!({"error": "invalid_grant"}))
                }
            } else {
                Answer::not_found()
            }
        })
        .await;
        // A free port for the listener (the login binds it again at once).
        let port = {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().port()
        };
        let cfg = UserAuth {
            upstream: name.to_owned(),
            client_id: Some("mcpx-test".to_owned()),
            callback_port: Some(port),
            store: Some(mcpx_testkit::scratch::dir(&format!(
                "oauth-callback-{name}"
            ))),
            ..UserAuth::default()
        };
        let url = Url::parse(&format!("http://127.0.0.1:{}/mcp", server.port)).unwrap();
        let http = Http::standalone(Duration::from_secs(5));
        let begun = within(
            "begin_login",
            begin_login(&http, &cfg, &url, false, Some("Bearer".to_owned()), ""),
        )
        .await
        .unwrap();
        let Begun::Pending(pending) = begun else {
            panic!("the callback port {port} is taken: {begun:?}");
        };
        let state = state_of(&pending);
        let finish =
            tokio::spawn(async move { pending.finish(&http, Duration::from_secs(60)).await });
        Login {
            server,
            port,
            state,
            finish,
        }
    }

    /// A request on a new connection to the listener, and its answer.
    async fn request(&self, method: &str, target: &str) -> Reply {
        let mut s = within(
            "a connection to the listener",
            TcpStream::connect(("127.0.0.1", self.port)),
        )
        .await
        .unwrap();
        let head = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.port
        );
        s.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            let n = within("the listener's answer", s.read(&mut byte))
                .await
                .unwrap();
            assert_eq!(n, 1, "the answer ended in its head: {answer:?}");
            answer.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&answer).into_owned();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status: {head:?}"));
        let header = |name: &str| {
            head.lines().skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
            })
        };
        let length: usize = header("content-length").unwrap().parse().unwrap();
        let mut page = vec![0u8; length];
        within("the listener's page", s.read_exact(&mut page))
            .await
            .unwrap();
        let page = String::from_utf8_lossy(&page).into_owned();
        Reply {
            status,
            allow: header("allow"),
            connection: header("connection"),
            page,
        }
    }

    /// The real redirect: answered 200, and the login completes with the token.
    async fn redirect_completes(self) {
        let r = self
            .request(
                "GET",
                &format!("/callback?code=the-code&state={}", self.state),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.page);
        let record = within("the login's end", self.finish)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(record.access_token, "at-1");
        let grants = self
            .server
            .seen()
            .iter()
            .filter(|r| r.line().starts_with("POST /token "))
            .count();
        assert_eq!(grants, 1);
    }
}

/// The listener's answer to a request.
struct Reply {
    status: u16,
    allow: Option<String>,
    connection: Option<String>,
    page: String,
}

fn state_of(pending: &PendingLogin) -> String {
    pending
        .authorization_url()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap()
}

/// Waits until the listener closes `s` (end of stream, or a reset), at most `limit`.
async fn closed_by_listener(s: &mut TcpStream, limit: Duration, what: &str) {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(limit, s.read(&mut buf)).await {
        Ok(Ok(0) | Err(_)) => {}
        Ok(Ok(n)) => panic!("{what}: the listener sent {:?}", &buf[..n]),
        Err(_) => panic!("{what}: still open after {limit:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_redirect_is_refused_and_the_login_waits_on() {
    let login = Login::start("forged").await;

    let forged = login.request("GET", "/callback?code=x&state=WRONG").await;
    assert_eq!(forged.status, 400, "{}", forged.page);
    // No state, a repeated one, the right one's prefix: none is the redirect.
    let prefix = &login.state[..login.state.len() - 1];
    for q in [
        "code=x".to_owned(),
        format!("code=x&state=WRONG&state={}", login.state),
        format!("code=x&state={prefix}"),
        format!("error=access_denied&state={prefix}"),
    ] {
        let r = login.request("GET", &format!("/callback?{q}")).await;
        assert_eq!(r.status, 400, "{q}: {}", r.page);
        assert!(r.page.contains("still waits"), "{q}: {}", r.page);
    }
    assert!(
        forged.page.contains("not the redirect mcpx is waiting for"),
        "{}",
        forged.page
    );

    let r = login.request("GET", "/favicon.ico").await;
    assert_eq!(r.status, 404, "{}", r.page);
    // One request a connection.
    assert_eq!(r.connection.as_deref(), Some("close"));
    let r = login
        .request("POST", &format!("/callback?code=x&state={}", login.state))
        .await;
    assert_eq!(
        (r.status, r.allow.as_deref()),
        (405, Some("GET")),
        "{}",
        r.page
    );

    assert!(!login.finish.is_finished(), "the login ended early");
    login.redirect_completes().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_idle_connections_keep_no_redirect_out() {
    let login = Login::start("idle").await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(
            within(
                "an idle connection",
                TcpStream::connect(("127.0.0.1", login.port)),
            )
            .await
            .unwrap(),
        );
    }
    // 16 are served at once: the four oldest were closed for the newest, long before
    // their heads' time is up.
    for (i, s) in idle[..4].iter_mut().enumerate() {
        closed_by_listener(s, Duration::from_secs(2), &format!("idle connection {i}")).await;
    }
    login.redirect_completes().await;
    // The login's end closed the rest.
    for (i, s) in idle[4..].iter_mut().enumerate() {
        closed_by_listener(
            s,
            Duration::from_secs(2),
            &format!("idle connection {}", i + 4),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_a_whole_head_is_closed_within_seconds() {
    let login = Login::start("slow").await;
    let mut silent = TcpStream::connect(("127.0.0.1", login.port)).await.unwrap();
    let mut half = TcpStream::connect(("127.0.0.1", login.port)).await.unwrap();
    half.write_all(b"GET /callback?code=x HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // The listener's head timeout (3 s), with time to spare on a busy machine.
    closed_by_listener(&mut silent, Duration::from_secs(8), "a silent connection").await;
    closed_by_listener(&mut half, Duration::from_secs(8), "a half-sent head").await;
    assert!(!login.finish.is_finished(), "the login ended early");
    login.redirect_completes().await;
}
