//! The request's client address as an extractor (`crate::client_addr` reads it from the peer and
//! the trusted proxies' `X-Forwarded-For`).

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;

use crate::state::AppState;

/// The request's client address; `None` when the server was not told the peer (a router used
/// without connection info, as in some tests), which the limits treat as unlimited.
pub struct ClientAddr(pub Option<IpAddr>);

impl FromRequestParts<AppState> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        Ok(ClientAddr(peer.map(|p| {
            state.config.trusted_proxies.client(p, &parts.headers)
        })))
    }
}
