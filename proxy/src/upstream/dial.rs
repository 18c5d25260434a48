//! How regroup reaches the apiserver's TCP port: directly, or through the
//! cluster's `proxy-url` as kubectl does: an HTTP proxy by `CONNECT` (for
//! https and http servers alike; credentials in the URL become
//! `Proxy-Authorization: Basic`), or a SOCKS5 proxy (`socks5://`). TLS to
//! the apiserver then runs inside the tunnel, end to end.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use base64::Engine as _;
use http::{HeaderValue, Uri};
use hyper_util::client::legacy::connect::proxy::{SocksV5, Tunnel};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::BoxError;

/// Why a cluster's `proxy-url` can't be used.
#[derive(Debug, thiserror::Error)]
pub enum ProxyUrlError {
    /// Not a URL.
    #[error("proxy-url: not a URL: {0}")]
    NotAUrl(#[source] http::uri::InvalidUri),
    /// A URL without a host.
    #[error("proxy-url: no host")]
    NoHost,
    /// TLS to the proxy itself.
    #[error(
        "proxy-url: an https:// proxy (TLS to the proxy itself) is not supported; use http:// or socks5://"
    )]
    Https,
    /// Another scheme.
    #[error("proxy-url: scheme `{0}` is not supported (http, socks5)")]
    Scheme(String),
    /// The proxy's host and port make no URI.
    #[error("proxy-url: {0}")]
    Address(#[source] http::uri::InvalidUri),
    /// The URL's user and password can't be a header (never quoted).
    #[error("proxy-url: credentials are not a valid header value")]
    Credentials,
}

/// A connector: direct, or through a proxy.
#[derive(Clone)]
pub enum Dial {
    /// Straight to the apiserver.
    Direct(HttpConnector),
    /// HTTP `CONNECT` through a proxy.
    Connect(Tunnel<HttpConnector>),
    /// Through a SOCKS5 proxy.
    Socks5(SocksV5<HttpConnector>),
}

impl Dial {
    /// `proxy_url` (none: direct) over `http`.
    pub fn new(http: HttpConnector, proxy_url: Option<&str>) -> Result<Dial, ProxyUrlError> {
        let Some(url) = proxy_url else {
            return Ok(Dial::Direct(http));
        };
        let uri: Uri = url.parse().map_err(ProxyUrlError::NotAUrl)?;
        let host = uri.host().ok_or(ProxyUrlError::NoHost)?;
        let (user, pass) = match uri.authority().map(|a| a.as_str()) {
            Some(a) if a.contains('@') => {
                let info = &a[..a.rfind('@').unwrap_or(0)];
                let (u, p) = info.split_once(':').unwrap_or((info, ""));
                let dec = |s: &str| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8_lossy()
                        .into_owned()
                };
                (Some(dec(u)), dec(p))
            }
            _ => (None, String::new()),
        };
        let scheme = uri.scheme_str().unwrap_or("");
        let default_port = match scheme {
            "http" => 80,
            "socks5" => 1080,
            "https" => return Err(ProxyUrlError::Https),
            s => return Err(ProxyUrlError::Scheme(s.to_owned())),
        };
        let port = uri.port_u16().unwrap_or(default_port);
        let dst: Uri = format!("http://{host}:{port}")
            .parse()
            .map_err(ProxyUrlError::Address)?;
        Ok(match scheme {
            "socks5" => {
                let s = SocksV5::new(dst, http);
                Dial::Socks5(match user {
                    Some(u) => s.with_auth(u, pass),
                    None => s,
                })
            }
            _ => {
                let t = Tunnel::new(dst, http);
                Dial::Connect(match user {
                    Some(u) => {
                        let v =
                            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{pass}"));
                        let v = HeaderValue::from_str(&format!("Basic {v}"))
                            .map_err(|_| ProxyUrlError::Credentials)?;
                        t.with_auth(v)
                    }
                    None => t,
                })
            }
        })
    }
}

type Connecting = Pin<Box<dyn Future<Output = Result<TokioIo<TcpStream>, BoxError>> + Send>>;

impl tower_service::Service<Uri> for Dial {
    type Response = TokioIo<TcpStream>;
    type Error = BoxError;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        match self {
            Dial::Direct(c) => c.poll_ready(cx).map_err(Into::into),
            Dial::Connect(c) => c.poll_ready(cx).map_err(Into::into),
            Dial::Socks5(c) => c.poll_ready(cx).map_err(Into::into),
        }
    }

    fn call(&mut self, dst: Uri) -> Connecting {
        // The proxy needs the port: the scheme's when the URL has none.
        let dst = with_port(dst);
        match self {
            Dial::Direct(c) => {
                let f = c.call(dst);
                Box::pin(async move { f.await.map_err(Into::into) })
            }
            Dial::Connect(c) => {
                let f = c.call(dst);
                Box::pin(async move { f.await.map_err(Into::into) })
            }
            Dial::Socks5(c) => {
                let f = c.call(dst);
                Box::pin(async move { f.await.map_err(Into::into) })
            }
        }
    }
}

fn with_port(dst: Uri) -> Uri {
    if dst.port().is_some() {
        return dst;
    }
    let port = if dst.scheme_str() == Some("http") {
        80
    } else {
        443
    };
    let (Some(scheme), Some(host)) = (dst.scheme_str(), dst.host()) else {
        return dst;
    };
    format!("{scheme}://{host}:{port}").parse().unwrap_or(dst)
}
