//! The address a request comes from, for the rate limits: the TCP peer, unless the peer is one of
//! `GLASSBOX_TRUSTED_PROXIES` (comma list of addresses or CIDR ranges); then the nearest address in
//! `X-Forwarded-For` that is not a trusted proxy. A header from anyone else is ignored, so a client
//! cannot pick its own address by sending one.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// Proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

/// A `GLASSBOX_TRUSTED_PROXIES` entry that is neither an address nor a CIDR range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "GLASSBOX_TRUSTED_PROXIES: {0:?} is not an IP address or CIDR range (e.g. 10.0.0.0/8, ::1)"
)]
pub struct ProxyConfigError(pub String);

impl TrustedProxies {
    /// Reads the variable's value (unset: no proxy is trusted).
    pub fn parse(value: Option<&str>) -> Result<Self, ProxyConfigError> {
        value
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(|e| {
                e.parse::<IpNet>()
                    .or_else(|_| e.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| ProxyConfigError(e.to_owned()))
            })
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address for a request from `peer` with these headers (IPv4-mapped IPv6
    /// addresses read as IPv4).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.trusts(client) {
            return client;
        }
        // Each proxy appends the address it got the request from: read from the right, past our
        // own proxies, to the first address a trusted proxy vouches for. An entry we cannot read
        // stops the walk at the last trusted hop, so nothing left of it (what a client may have
        // written itself) can be picked.
        let entries: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        for entry in entries.iter().rev() {
            let Some(ip) = parse_forwarded(entry) else {
                return client;
            };
            client = ip;
            if !self.trusts(ip) {
                return ip;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, optionally with a port (`1.2.3.4:5678`,
/// `[2001:db8::1]:443`), as some proxies write it.
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|s| s.ip()))
        .ok()
        .map(|ip| ip.to_canonical())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn forwarded_for_counts_only_from_trusted_proxies() {
        let none = TrustedProxies::parse(None).unwrap();
        let peer: IpAddr = "203.0.113.7".parse().unwrap();
        assert_eq!(
            none.client(peer, &headers(&["1.2.3.4"])),
            peer,
            "a client cannot pick its address"
        );

        let proxies = TrustedProxies::parse(Some("10.0.0.0/8, 127.0.0.1")).unwrap();
        let proxy: IpAddr = "10.1.2.3".parse().unwrap();
        let client: IpAddr = "198.51.100.9".parse().unwrap();
        // The client forged an entry; our proxy appended the real one.
        assert_eq!(
            proxies.client(proxy, &headers(&["6.6.6.6, 198.51.100.9"])),
            client
        );
        assert_eq!(
            proxies.client(proxy, &headers(&["6.6.6.6", "198.51.100.9, 10.9.9.9"])),
            client
        );
        assert_eq!(
            proxies.client(proxy, &headers(&[])),
            proxy,
            "no header: the proxy itself"
        );
        assert_eq!(proxies.client(proxy, &headers(&["garbage"])), proxy);
        assert!(TrustedProxies::parse(Some("10.0.0.0/33")).is_err());
        assert!(TrustedProxies::parse(Some("proxy.local")).is_err());
    }
}
