//! Verified users: a host's backend vouches for its user with the hex HMAC-SHA256 of the user's
//! id under `GLASSBOX_IDENTITY_SECRET` (docs/embedding.md, "Users who come back"). A verified user's
//! sessions are theirs on any device; without the secret nobody is verified.

use std::sync::Arc;

use glassbox_core::wire::UserClaim;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The longest user id a host may pass (characters).
pub const MAX_USER_ID_CHARS: usize = 128;

/// A user whose claim was checked: their id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerifiedUser(Arc<str>);

impl VerifiedUser {
    /// The host's id of the user.
    pub fn id(&self) -> &str {
        &self.0
    }
}

/// Why a claimed user was not verified (each is `unauthorized` on the wire).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "user identity is not configured on this server (GLASSBOX_IDENTITY_SECRET is not set): \
         leave out `user`"
    )]
    NotConfigured,
    #[error("a user id is 1–{MAX_USER_ID_CHARS} characters")]
    BadId,
    #[error("the user's hash does not match its id")]
    WrongHash,
    #[error("this needs a verified user (`user` in hello, or the X-Glassbox-User headers)")]
    NoUser,
}

/// Checks user claims against the server's secret (none: every claim is refused).
#[derive(Clone, Default)]
pub struct Identity {
    secret: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for Identity {
    /// The secret is never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("configured", &self.secret.is_some())
            .finish()
    }
}

impl Identity {
    /// Verifies claims with the key `secret` (`GLASSBOX_IDENTITY_SECRET`'s bytes).
    pub fn new(secret: Option<&[u8]>) -> Self {
        Self {
            secret: secret.map(Arc::from),
        }
    }

    /// The user of `claim` when its hash is the HMAC of its id (hex, either case; compared in
    /// constant time).
    pub fn verify(&self, claim: &UserClaim) -> Result<VerifiedUser, IdentityError> {
        let secret = self.secret.as_ref().ok_or(IdentityError::NotConfigured)?;
        let chars = claim.id.chars().count();
        if chars == 0 || chars > MAX_USER_ID_CHARS {
            return Err(IdentityError::BadId);
        }
        let hash = hex::decode(claim.hash.trim()).map_err(|_| IdentityError::WrongHash)?;
        let mut mac =
            Hmac::<Sha256>::new_from_slice(secret).map_err(|_| IdentityError::WrongHash)?;
        mac.update(claim.id.as_bytes());
        mac.verify_slice(&hash)
            .map_err(|_| IdentityError::WrongHash)?;
        Ok(VerifiedUser(Arc::from(claim.id.as_str())))
    }

    /// Verifies `claim` when there is one.
    pub fn verify_opt(
        &self,
        claim: Option<&UserClaim>,
    ) -> Result<Option<VerifiedUser>, IdentityError> {
        claim.map(|c| self.verify(c)).transpose()
    }
}

/// The hex HMAC-SHA256 of `id` under `secret`: what a host's backend sends (tests and docs use it).
pub fn user_hash(secret: &str, id: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "0123456789abcdef-test-secret";

    fn identity() -> Identity {
        Identity::new(Some(SECRET.as_bytes()))
    }

    fn claim(id: &str, hash: &str) -> UserClaim {
        UserClaim {
            id: id.into(),
            hash: hash.into(),
        }
    }

    #[test]
    fn the_documented_hash_verifies_in_either_case() {
        // RFC 4231 test case 2's key and data give its published MAC.
        let rfc = user_hash("Jefe", "what do ya want for nothing?");
        assert_eq!(
            rfc,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let hash = user_hash(SECRET, "user-42");
        assert_eq!(
            identity().verify(&claim("user-42", &hash)).unwrap().id(),
            "user-42"
        );
        let upper = hash.to_uppercase();
        assert!(identity().verify(&claim("user-42", &upper)).is_ok());
    }

    #[test]
    fn wrong_missing_or_borrowed_hashes_are_refused() {
        let id = identity();
        let other = user_hash(SECRET, "user-43");
        assert_eq!(
            id.verify(&claim("user-42", &other)),
            Err(IdentityError::WrongHash)
        );
        assert_eq!(
            id.verify(&claim("user-42", "")),
            Err(IdentityError::WrongHash)
        );
        assert_eq!(
            id.verify(&claim("user-42", "zz")),
            Err(IdentityError::WrongHash)
        );
        let truncated = &user_hash(SECRET, "user-42")[..32];
        assert_eq!(
            id.verify(&claim("user-42", truncated)),
            Err(IdentityError::WrongHash)
        );
        let under_other_secret = user_hash("another-secret-of-16+", "user-42");
        assert_eq!(
            id.verify(&claim("user-42", &under_other_secret)),
            Err(IdentityError::WrongHash)
        );
    }

    #[test]
    fn ids_are_1_to_128_characters() {
        let id = identity();
        assert_eq!(
            id.verify(&claim("", &user_hash(SECRET, ""))),
            Err(IdentityError::BadId)
        );
        let long = "é".repeat(MAX_USER_ID_CHARS);
        assert!(
            id.verify(&claim(&long, &user_hash(SECRET, &long))).is_ok(),
            "characters, not bytes"
        );
        let longer = "é".repeat(MAX_USER_ID_CHARS + 1);
        assert_eq!(
            id.verify(&claim(&longer, &user_hash(SECRET, &longer))),
            Err(IdentityError::BadId)
        );
    }

    #[test]
    fn without_a_secret_no_claim_is_verified() {
        let none = Identity::default();
        let err = none
            .verify(&claim("u", &user_hash(SECRET, "u")))
            .unwrap_err();
        assert_eq!(err, IdentityError::NotConfigured);
        assert!(err.to_string().contains("not configured"));
        assert!(!format!("{:?}", identity()).contains("0123"));
    }
}
