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
    /// common encodings, and every 8-character window of them (servers truncate what they echo:
    /// PostgreSQL cuts user names at 63 bytes, MySQL at 32), from a driver message.
    pub fn scrub(&self, message: &str) -> String {
        scrub_windows(
            &scrub_text(&scrub_text(message, &self.password), &self.username),
            &[&self.password, &self.username],
        )
    }

    /// What a server said, for the debug log only: semops never puts server text in status,
    /// Events or API bodies (docs/security.md), since a server may echo a fragment of what it
    /// was sent. Returns `ours` with the server's error `code`, the text logged scrubbed.
    pub fn server_said(&self, ours: &str, code: &str, text: &str) -> String {
        tracing::debug!(code, server_text = %self.scrub(text), "{ours}");
        if code.is_empty() {
            ours.to_string()
        } else {
            format!("{ours} ({code})")
        }
    }
}

/// Length of the windows [`scrub_windows`] removes.
pub const SCRUB_WINDOW: usize = 8;

/// Replaces every run of `message` covered by an occurrence of any [`SCRUB_WINDOW`]-character
/// window of any of `secrets` (values shorter than a window are left to [`scrub_text`]).
pub fn scrub_windows(message: &str, secrets: &[&str]) -> String {
    let mut covered = vec![false; message.len()];
    let mut any = false;
    for secret in secrets {
        let chars: Vec<(usize, char)> = secret.char_indices().collect();
        if chars.len() < SCRUB_WINDOW {
            continue;
        }
        for i in 0..=chars.len() - SCRUB_WINDOW {
            let start = chars[i].0;
            let end = chars
                .get(i + SCRUB_WINDOW)
                .map_or(secret.len(), |(at, _)| *at);
            let window = &secret[start..end];
            for (at, _) in message.match_indices(window) {
                covered[at..at + window.len()]
                    .iter_mut()
                    .for_each(|c| *c = true);
                any = true;
            }
        }
    }
    if !any {
        return message.to_string();
    }
    let mut out = String::with_capacity(message.len());
    let mut in_run = false;
    for (at, c) in message.char_indices() {
        if covered[at] {
            if !in_run {
                out.push_str("[redacted]");
                in_run = true;
            }
        } else {
            out.push(c);
            in_run = false;
        }
    }
    out
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
    fn scrub_removes_every_fragment_a_server_may_echo_of_a_long_value() {
        let long =
            "k9F2xQ7wLm3Zp8Rt5Vb1Nc6Yh4Jd0Gs2Ae7Uq9Wi3Oo5Ek1Tr8Ly6Mn2Bv4Cx0Zs7Dq3Fw9Hp5Jk1Lm8Nb"; // 80
        let c = Credentials::new(long, "short-pw");
        let pg = format!(
            "password authentication failed for user \"{}\"",
            &long[..63]
        );
        let my = format!("Access denied for user '{}'@'10.0.0.1'", &long[..32]);
        let middle = format!("near \"{}\": syntax error", &long[20..29]);
        for text in [pg, my, middle] {
            let out = c.scrub(&text);
            for w in 0..=long.len() - SCRUB_WINDOW {
                assert!(!out.contains(&long[w..w + SCRUB_WINDOW]), "{out}");
            }
            assert!(out.contains("[redacted]"), "{out}");
        }
        // A run of overlapping windows is one redaction; text around it stays.
        let out = c.scrub(&format!("user \"{}\" (x)", &long[..40]));
        assert_eq!(out, "user \"[redacted]\" (x)");
        // Text that shares less than a window with a value is left alone.
        assert_eq!(c.scrub("k9F2xQ7 is fine"), "k9F2xQ7 is fine");
        // Multi-byte characters: windows are characters, never split bytes.
        let c = Credentials::new("ünïcödé-pässwörd", "p");
        assert_eq!(c.scrub("got ïcödé-pä!"), "got [redacted]!");
    }

    #[test]
    fn server_text_is_replaced_by_our_words_and_the_code() {
        let c = Credentials::new("victim-user-name", "pw");
        let said = c.server_said(
            "the server refused the credentials",
            "SQLSTATE 28P01",
            "password authentication failed for user \"victim-user-name\"",
        );
        assert_eq!(said, "the server refused the credentials (SQLSTATE 28P01)");
        assert_eq!(c.server_said("refused", "", "anything"), "refused");
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

    #[test]
    fn the_values_are_read_only_through_their_accessors() {
        let c = Credentials::new("canary-user", "canary-S3cr3t");
        assert_eq!(
            (c.username(), c.expose_password()),
            ("canary-user", "canary-S3cr3t")
        );
        assert_eq!(c.to_string(), "[redacted] / [redacted]");
        assert_eq!(
            format!("{c:?}"),
            r#"Credentials { username: "[redacted]", password: "[redacted]" }"#
        );
        let cert = ClientCertificate::new("CHAIN", "canary-KEY");
        assert_eq!(
            (cert.chain_pem.as_slice(), cert.expose_key()),
            (&b"CHAIN"[..], &b"canary-KEY"[..])
        );
        assert_eq!(format!("{cert:?}"), "ClientCertificate(<redacted>)");
    }

    #[test]
    fn short_values_are_replaced_only_where_they_stand_alone() {
        // (value, message, scrubbed)
        let cases = [
            // Four characters and more: everywhere, inside words too.
            ("abcd", "xabcdx abcd", "x[redacted]x [redacted]"),
            // Shorter: only where neither neighbour is a letter, digit or underscore.
            (
                "pw1",
                "pw1x xpw1 _pw1 pw1_ (pw1) pw1",
                "pw1x xpw1 _pw1 pw1_ ([redacted]) [redacted]",
            ),
            ("", "nothing to hide", "nothing to hide"),
        ];
        for (value, message, scrubbed) in cases {
            assert_eq!(scrub_text(message, value), scrubbed, "{value:?}");
        }
    }
}
