//! SASL client messages for Kafka (pure: no I/O): PLAIN (RFC 4616) and SCRAM-SHA-256/512
//! (RFC 5802, RFC 7677) without channel binding, as the Kafka broker implements them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::{hmac, pbkdf2};

use crate::crd::catalog::SaslMechanism;

/// The one PLAIN message: authorization id (empty), user, password.
pub fn plain(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

/// Why a SCRAM exchange cannot go on. `Rejected` means the server proved nothing (or the wrong
/// thing): the credentials or the server are not what they claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramError {
    /// The server's message does not parse as SCRAM.
    Malformed(String),
    /// The server's nonce does not extend ours, or its signature does not verify.
    Rejected(String),
}

/// A SCRAM client for one exchange: `first` → server-first → `answer` → server-final → `verify`.
pub struct Scram {
    mechanism: SaslMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// Set by `answer`: what the server must sign to prove it knows the password's verifier.
    expected_server_signature: Option<Vec<u8>>,
}

impl Scram {
    /// A client with a random nonce.
    pub fn new(mechanism: SaslMechanism, username: &str, password: &str) -> Self {
        let nonce: [u8; 18] = rand::random();
        Self::with_nonce(mechanism, username, password, &B64.encode(nonce))
    }

    fn with_nonce(mechanism: SaslMechanism, username: &str, password: &str, nonce: &str) -> Self {
        let user = username.replace('=', "=3D").replace(',', "=2C");
        Self {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={user},r={nonce}"),
            nonce: nonce.to_string(),
            expected_server_signature: None,
        }
    }

    /// The client-first message.
    pub fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message for the server-first message.
    pub fn answer(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| ScramError::Malformed("server-first is not UTF-8".into()))?;
        if let Some(e) = attribute(text, 'e') {
            return Err(ScramError::Rejected(format!("the server refused: {e}")));
        }
        let nonce = attribute(text, 'r')
            .ok_or_else(|| ScramError::Malformed("server-first has no nonce".into()))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(ScramError::Rejected(
                "the server's nonce does not extend the client's".into(),
            ));
        }
        let salt = attribute(text, 's')
            .and_then(|s| B64.decode(s).ok())
            .ok_or_else(|| ScramError::Malformed("server-first has no usable salt".into()))?;
        let iterations = attribute(text, 'i')
            .and_then(|i| i.parse::<u32>().ok())
            .and_then(std::num::NonZeroU32::new)
            .ok_or_else(|| {
                ScramError::Malformed("server-first has no usable iteration count".into())
            })?;
        let (pbkdf, mac, len) = match self.mechanism {
            SaslMechanism::ScramSha256 => (pbkdf2::PBKDF2_HMAC_SHA256, hmac::HMAC_SHA256, 32),
            SaslMechanism::ScramSha512 => (pbkdf2::PBKDF2_HMAC_SHA512, hmac::HMAC_SHA512, 64),
            SaslMechanism::Plain => {
                return Err(ScramError::Malformed(
                    "PLAIN is not a SCRAM mechanism".into(),
                ));
            }
        };
        let mut salted = vec![0u8; len];
        pbkdf2::derive(
            pbkdf,
            iterations,
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let salted = hmac::Key::new(mac, &salted);
        let client_key = hmac::sign(&salted, b"Client Key");
        let stored_key = ring::digest::digest(
            match self.mechanism {
                SaslMechanism::ScramSha512 => &ring::digest::SHA512,
                _ => &ring::digest::SHA256,
            },
            client_key.as_ref(),
        );
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_signature = hmac::sign(
            &hmac::Key::new(mac, stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(client_signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::sign(&salted, b"Server Key");
        self.expected_server_signature = Some(
            hmac::sign(
                &hmac::Key::new(mac, server_key.as_ref()),
                auth_message.as_bytes(),
            )
            .as_ref()
            .to_vec(),
        );
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server must prove it knows the password's verifier.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| ScramError::Malformed("server-final is not UTF-8".into()))?;
        if let Some(e) = attribute(text, 'e') {
            return Err(ScramError::Rejected(format!("the server refused: {e}")));
        }
        let signature = attribute(text, 'v')
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| ScramError::Malformed("server-final has no signature".into()))?;
        // A plain comparison: the signature covers this exchange's nonces, so learning it byte by
        // byte through timing would let a server forge nothing but this, already failing, answer.
        match &self.expected_server_signature {
            Some(expected) if *expected == signature => Ok(()),
            _ => Err(ScramError::Rejected(
                "the server's signature does not verify: it does not know this user's verifier"
                    .into(),
            )),
        }
    }
}

/// The value of attribute `name` (`name=value`) of a SCRAM message.
fn attribute(message: &str, name: char) -> Option<&str> {
    message.split(',').find_map(|part| {
        let mut chars = part.chars();
        (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 7677, section 3.
    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_client() -> Scram {
        Scram::with_nonce(SaslMechanism::ScramSha256, "user", "pencil", NONCE)
    }

    #[test]
    fn scram_sha_256_matches_the_rfc_7677_exchange() {
        let mut c = rfc_client();
        assert_eq!(c.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        assert_eq!(
            c.answer(SERVER_FIRST.as_bytes()).unwrap(),
            CLIENT_FINAL.as_bytes()
        );
        assert_eq!(c.verify(SERVER_FINAL.as_bytes()), Ok(()));
    }

    #[test]
    fn a_server_that_cannot_prove_the_verifier_is_rejected() {
        let mut c = rfc_client();
        c.answer(SERVER_FIRST.as_bytes()).unwrap();
        let forged = "v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        assert!(matches!(
            c.verify(forged.as_bytes()),
            Err(ScramError::Rejected(_))
        ));
        assert!(
            matches!(
                rfc_client().verify(SERVER_FINAL.as_bytes()),
                Err(ScramError::Rejected(_))
            ),
            "no answer sent yet: nothing can verify"
        );
        assert!(matches!(
            rfc_client().verify(b"e=invalid-proof"),
            Err(ScramError::Rejected(_))
        ));
    }

    #[test]
    fn hostile_server_first_messages_are_errors_not_panics() {
        let cases = [
            (
                "r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "rejected",
            ),
            (
                "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                "rejected",
            ),
            ("r=rOprNGfwEbeRWgbNEkqOx,s=!!!,i=4096", "malformed"),
            (
                "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
                "malformed",
            ),
            (
                "r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==",
                "malformed",
            ),
            ("s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "malformed"),
            ("e=unknown-user", "rejected"),
            ("", "malformed"),
        ];
        for (message, want) in cases {
            let got = match rfc_client().answer(message.as_bytes()) {
                Err(ScramError::Rejected(_)) => "rejected",
                Err(ScramError::Malformed(_)) => "malformed",
                Ok(_) => "accepted",
            };
            assert_eq!(got, want, "{message}");
        }
    }

    #[test]
    fn user_names_are_escaped_and_plain_carries_both_values() {
        let c = Scram::with_nonce(SaslMechanism::ScramSha512, "a=b,c", "p", "n");
        assert_eq!(c.first(), b"n,,n=a=3Db=2Cc,r=n");
        assert_eq!(plain("bob", "s3cret"), b"\0bob\0s3cret");
    }

    #[test]
    fn sha_512_proofs_have_the_sha_512_length() {
        let mut c = Scram::with_nonce(SaslMechanism::ScramSha512, "user", "pencil", NONCE);
        let answer = String::from_utf8(c.answer(SERVER_FIRST.as_bytes()).unwrap()).unwrap();
        let proof = B64.decode(attribute(&answer, 'p').unwrap()).unwrap();
        assert_eq!(proof.len(), 64);
    }
}
