//! Credentials read from a Catalog's Secret. Debug and Display redact them, and every error text
//! that leaves a provider is scrubbed of the password.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
}

impl Credentials {
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }
    pub fn username(&self) -> &str {
        &self.username
    }
    /// The only way to read the password; call sites are the two drivers.
    pub fn expose_password(&self) -> &str {
        &self.password
    }

    /// Removes the password (and its common encodings) from a driver message.
    pub fn scrub(&self, message: &str) -> String {
        scrub_text(message, &self.password)
    }
}

/// Replaces every occurrence of `secret` in `message`; short secrets are still replaced, an empty
/// one is ignored.
pub fn scrub_text(message: &str, secret: &str) -> String {
    if secret.is_empty() {
        return message.to_string();
    }
    let mut out = message.replace(secret, "[redacted]");
    // URL-encoded form, as some drivers echo connection URLs.
    let encoded: String = secret
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    if encoded != secret {
        out = out.replace(&encoded, "[redacted]");
    }
    out
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .finish()
    }
}

impl fmt::Display for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} / [redacted]", self.username)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_password() {
        let c = Credentials::new("reader", "canary-S3cr3t");
        for text in [format!("{c:?}"), format!("{c}"), format!("{c:#?}")] {
            assert!(!text.contains("canary"), "{text}");
            assert!(text.contains("reader"));
        }
    }

    #[test]
    fn scrub_removes_plain_and_url_encoded_passwords() {
        let c = Credentials::new("u", "p@ss w/rd");
        let msg = "failed for postgres://u:p%40ss%20w%2Frd@h/db and p@ss w/rd";
        let out = c.scrub(msg);
        assert!(!out.contains("p@ss") && !out.contains("p%40ss"), "{out}");
        assert_eq!(out.matches("[redacted]").count(), 2);
    }
}
