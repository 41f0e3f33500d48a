//! Credentials read from a Catalog's Secret. Debug and Display redact them, and every error text
//! that leaves a provider is scrubbed of the password.

use std::fmt;

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    username: String,
    password: String,
}

/// A client certificate chain and its private key, PEM, from a Secret. Debug never shows the key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClientCertificate {
    pub chain_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl ClientCertificate {
    pub fn new(chain_pem: impl Into<Vec<u8>>, key_pem: impl Into<Vec<u8>>) -> Self {
        Self {
            chain_pem: chain_pem.into(),
            key_pem: key_pem.into(),
        }
    }
    /// The only way to read the private key; the call site is the TLS settings.
    pub fn expose_key(&self) -> &[u8] {
        &self.key_pem
    }
}

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCertificate(<redacted>)")
    }
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

    /// Removes every value read from the Secret — the password and the user name — with their
    /// common encodings, from a driver message.
    pub fn scrub(&self, message: &str) -> String {
        scrub_text(&scrub_text(message, &self.password), &self.username)
    }
}

/// Replaces every occurrence of `secret` in `message`. Values shorter than four characters are
/// replaced where they stand as a word (replacing every `a` would make messages unreadable and
/// protect nothing); an empty one is ignored.
pub fn scrub_text(message: &str, secret: &str) -> String {
    if secret.is_empty() {
        return message.to_string();
    }
    if secret.chars().count() < 4 {
        return replace_words(message, secret);
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

/// `secret` replaced where it is not part of a longer word.
fn replace_words(message: &str, secret: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find(secret) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + secret.len()..].chars().next();
        out.push_str(&rest[..i]);
        if word(before) || word(after) {
            out.push_str(secret);
        } else {
            out.push_str("[redacted]");
        }
        rest = &rest[i + secret.len()..];
    }
    out.push_str(rest);
    out
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &"[redacted]")
            .field("password", &"[redacted]")
            .finish()
    }
}

impl fmt::Display for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted] / [redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_a_value_from_the_secret() {
        let c = Credentials::new("canary-user", "canary-S3cr3t");
        for text in [format!("{c:?}"), format!("{c}"), format!("{c:#?}")] {
            assert!(!text.contains("canary"), "{text}");
        }
    }

    #[test]
    fn scrub_removes_the_user_name_too_and_short_values_only_as_words() {
        let c = Credentials::new("SUPERSECRETTOKEN123", "pw1");
        let out = c
            .scrub(r#"password authentication failed for user "SUPERSECRETTOKEN123" (pw1; apw12)"#);
        assert!(!out.contains("SUPERSECRETTOKEN123"), "{out}");
        assert!(out.contains("([redacted]; apw12)"), "{out}");
    }

    #[test]
    fn scrub_removes_plain_and_url_encoded_passwords() {
        let c = Credentials::new("u", "p@ss w/rd");
        let msg = "failed for postgres://u:p%40ss%20w%2Frd@h/db and p@ss w/rd";
        let out = c.scrub(msg);
        assert!(!out.contains("p@ss") && !out.contains("p%40ss"), "{out}");
        // The password twice, and the one-letter user name where it stands alone ("//u:").
        assert_eq!(out.matches("[redacted]").count(), 3, "{out}");
    }
}
