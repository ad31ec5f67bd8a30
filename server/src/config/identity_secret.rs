//! `GLASSBOX_IDENTITY_SECRET`: the key verified users' hashes are made with (see `identity`).

use std::sync::Arc;

/// The shortest secret the server accepts (bytes): shorter ones can be guessed.
pub const MIN_SECRET_BYTES: usize = 16;

/// The shared secret the host's backend makes hashes with (never logged).
#[derive(Clone)]
pub struct IdentitySecret(Arc<[u8]>);

impl IdentitySecret {
    /// The key's bytes (the secret's UTF-8).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for IdentitySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentitySecret(…)")
    }
}

impl std::str::FromStr for IdentitySecret {
    type Err = String;

    /// Reads `GLASSBOX_IDENTITY_SECRET` (its UTF-8 bytes are the key).
    fn from_str(s: &str) -> Result<Self, String> {
        if s.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "the identity secret must be at least {MIN_SECRET_BYTES} bytes (it is {}); \
                 make one with `openssl rand -hex 32`",
                s.len()
            ));
        }
        Ok(Self(Arc::from(s.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_secrets_are_refused_and_none_is_shown() {
        assert!("short".parse::<IdentitySecret>().is_err());
        let secret: IdentitySecret = "0123456789abcdef-secret".parse().unwrap();
        assert_eq!(secret.bytes(), b"0123456789abcdef-secret");
        assert!(!format!("{secret:?}").contains("0123"));
    }
}
