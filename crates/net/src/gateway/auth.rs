//! AUTH with Redis' semantics: when the cluster file sets `requirepass`, a connection may run
//! only AUTH, HELLO (with its AUTH option) and QUIT until it gives the password; every other
//! known command is answered `-NOAUTH Authentication required.` (an unknown command or a wrong
//! number of arguments still gets its own error first, as in Redis). Without `requirepass`,
//! AUTH behaves as Redis' does for a `default` user that has no password. The error texts are
//! redis-server 7.0.15's.

use super::Action;
use super::session::Context;
use crate::resp::Reply;
use bytes::Bytes;

/// The reply to a command refused before AUTH.
pub const NOAUTH: &str = "NOAUTH Authentication required.";

/// HELLO's refusal before AUTH, when it does not carry the AUTH option itself.
pub const NOAUTH_HELLO: &str = "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
                                HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
                                the RESP protocol version at the same time";

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// True when a command may run on a connection that has not authenticated (Redis' `no-auth`
/// commands that ordo has).
pub fn allowed_before_auth(name: &str) -> bool {
    matches!(name, "AUTH" | "HELLO" | "QUIT")
}

/// True when the connection must still give the password.
pub fn required(context: &mut Context) -> bool {
    context.facts.requirepass.is_some() && !context.session_mut().authenticated
}

/// Checks a user and password, and marks the connection authenticated when they are right. A
/// wrong pair leaves the connection as it was (an authenticated connection stays so, as in
/// Redis). Without `requirepass` the `default` user takes any password.
pub fn authenticate(user: &[u8], password: &[u8], context: &mut Context) -> Result<(), Action> {
    let right = user == b"default"
        && context.facts.requirepass.as_ref().is_none_or(|expected| same_password(password, expected.0.as_bytes()));
    if !right {
        return Err(Action::Reply(Reply::Error(WRONGPASS.into())));
    }
    context.session_mut().authenticated = true;
    Ok(())
}

/// `AUTH [user] password`.
pub fn auth(rest: &[Bytes], context: &mut Context) -> Action {
    let (user, password): (&[u8], &Bytes) = match rest {
        [password] if context.facts.requirepass.is_some() => (b"default", password),
        [_password] => {
            return Action::Reply(Reply::Error(
                "ERR AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?"
                    .into(),
            ));
        }
        [user, password] => (user, password),
        _ => return Action::Reply(Reply::Error("ERR syntax error".into())),
    };
    authenticate(user, password, context).map_or_else(|refused| refused, |()| Action::Reply(Reply::Simple("OK")))
}

/// Compares a given password with the expected one in time that depends only on the given
/// one's length, so that timing the replies does not reveal how many leading bytes were right.
pub fn same_password(given: &[u8], expected: &[u8]) -> bool {
    if expected.is_empty() {
        return given.is_empty();
    }
    let mut difference = u8::from(given.len() != expected.len());
    for (at, &byte) in given.iter().enumerate() {
        difference |= byte ^ expected[at % expected.len()];
    }
    // Keeps the compiler from turning the loop into an early-exit comparison.
    std::hint::black_box(difference) == 0
}
