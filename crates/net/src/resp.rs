//! RESP2: a hand-written request parser (arrays of bulk strings, and inline commands for telnet
//! and nc) that handles pipelining, and the reply encoder. Every malformed input is a typed
//! [`RespError`]; every length is bounded.

use bytes::{Bytes, BytesMut};
use thiserror::Error;

/// Most arguments of one command.
pub const ARGS_MAX: usize = 1_024 * 1_024;
/// Largest bulk string (Redis' own limit is 512 MiB; ours is smaller).
pub const BULK_LEN_MAX: usize = 64 * 1024 * 1024;
/// Longest inline command or header line.
pub const LINE_MAX: usize = 64 * 1024;

/// Why a request could not be parsed; the connection is closed after replying.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RespError {
    /// A `*` or `$` header without a valid number.
    #[error("Protocol error: invalid {0} length")]
    BadLength(&'static str),
    /// Inside an array, something else than a bulk string.
    #[error("Protocol error: expected '$', got '{0}'")]
    ExpectedBulk(char),
    /// A bulk string not followed by CRLF.
    #[error("Protocol error: bulk string not terminated by CRLF")]
    MissingCrlf,
    /// A line longer than [`LINE_MAX`].
    #[error("Protocol error: too big inline request")]
    LineTooLong,
    /// Unbalanced quotes in an inline command.
    #[error("Protocol error: unbalanced quotes in request")]
    Quotes,
}

fn find_crlf(buffer: &[u8], from: usize) -> Option<usize> {
    buffer.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|p| p + from)
}

fn parse_number(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Parses one request from the front of `buffer`, consuming it. `Ok(None)`: more bytes needed
/// (nothing consumed). An empty inline line yields an empty argument list.
pub fn parse(buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RespError> {
    let Some(&first) = buffer.first() else { return Ok(None) };
    if first != b'*' {
        return parse_inline(buffer);
    }
    let Some(end) = find_crlf(buffer, 1) else {
        return if buffer.len() > LINE_MAX { Err(RespError::LineTooLong) } else { Ok(None) };
    };
    let count = parse_number(&buffer[1..end]).ok_or(RespError::BadLength("multibulk"))?;
    if count > ARGS_MAX as i64 {
        return Err(RespError::BadLength("multibulk"));
    }
    let count = count.max(0) as usize;
    // First pass: find every argument's span without consuming, so an incomplete request
    // leaves the buffer untouched.
    let mut at = end + 2;
    let mut spans = Vec::with_capacity(count.min(1_024));
    for _ in 0..count {
        let Some(&tag) = buffer.get(at) else { return Ok(None) };
        if tag != b'$' {
            return Err(RespError::ExpectedBulk(tag as char));
        }
        let Some(line_end) = find_crlf(buffer, at + 1) else {
            return if buffer.len() - at > LINE_MAX { Err(RespError::LineTooLong) } else { Ok(None) };
        };
        let len = parse_number(&buffer[at + 1..line_end]).ok_or(RespError::BadLength("bulk"))?;
        if len < 0 || len as usize > BULK_LEN_MAX {
            return Err(RespError::BadLength("bulk"));
        }
        let start = line_end + 2;
        let stop = start + len as usize;
        if buffer.len() < stop + 2 {
            return Ok(None);
        }
        if &buffer[stop..stop + 2] != b"\r\n" {
            return Err(RespError::MissingCrlf);
        }
        spans.push((start, stop));
        at = stop + 2;
    }
    let frozen = buffer.split_to(at).freeze();
    Ok(Some(spans.into_iter().map(|(start, stop)| frozen.slice(start..stop)).collect()))
}

fn parse_inline(buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RespError> {
    let Some(end) = buffer.iter().position(|&b| b == b'\n') else {
        return if buffer.len() > LINE_MAX { Err(RespError::LineTooLong) } else { Ok(None) };
    };
    if end > LINE_MAX {
        return Err(RespError::LineTooLong);
    }
    let line = buffer.split_to(end + 1);
    let text = line[..end].strip_suffix(b"\r").unwrap_or(&line[..end]);
    split_inline(text).map(Some)
}

/// Splits an inline command into words, honouring double and single quotes.
fn split_inline(text: &[u8]) -> Result<Vec<Bytes>, RespError> {
    let mut words = Vec::new();
    let mut at = 0;
    while at < text.len() {
        while at < text.len() && text[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= text.len() {
            break;
        }
        let mut word = Vec::new();
        match text[at] {
            quote @ (b'"' | b'\'') => {
                at += 1;
                loop {
                    let Some(&c) = text.get(at) else { return Err(RespError::Quotes) };
                    at += 1;
                    if c == quote {
                        break;
                    }
                    if c == b'\\' && quote == b'"' {
                        let Some(&escaped) = text.get(at) else { return Err(RespError::Quotes) };
                        at += 1;
                        word.push(match escaped {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            other => other,
                        });
                    } else {
                        word.push(c);
                    }
                }
                if text.get(at).is_some_and(|c| !c.is_ascii_whitespace()) {
                    return Err(RespError::Quotes);
                }
            }
            _ => {
                while at < text.len() && !text[at].is_ascii_whitespace() {
                    word.push(text[at]);
                    at += 1;
                }
            }
        }
        words.push(Bytes::from(word));
    }
    Ok(words)
}

/// A reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+text`
    Simple(&'static str),
    /// `-text`
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$len bytes` or nil.
    Bulk(Option<Bytes>),
    /// `*n` of bulk strings or nils.
    Array(Vec<Option<Bytes>>),
    /// `*n` of replies.
    Nested(Vec<Reply>),
}

impl Reply {
    /// Appends the reply's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(text) => {
                out.push(b'+');
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Error(text) => {
                out.push(b'-');
                // An error line must not contain CR or LF.
                out.extend(text.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
                out.extend_from_slice(b"\r\n");
            }
            Reply::Integer(n) => {
                out.push(b':');
                out.extend_from_slice(n.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Bulk(value) => encode_bulk(value.as_ref(), out),
            Reply::Array(values) => {
                out.push(b'*');
                out.extend_from_slice(values.len().to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
                values.iter().for_each(|v| encode_bulk(v.as_ref(), out));
            }
            Reply::Nested(replies) => {
                out.push(b'*');
                out.extend_from_slice(replies.len().to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
                replies.iter().for_each(|r| r.encode(out));
            }
        }
    }
}

fn encode_bulk(value: Option<&Bytes>, out: &mut Vec<u8>) {
    match value {
        None => out.extend_from_slice(b"$-1\r\n"),
        Some(bytes) => {
            out.push(b'$');
            out.extend_from_slice(bytes.len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(bytes);
            out.extend_from_slice(b"\r\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, RespError> {
        let mut buffer = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(command) = parse(&mut buffer)? {
            out.push(command);
        }
        Ok(out)
    }

    #[test]
    fn pipelined_arrays_and_inline_commands() {
        // Goal: several requests in one read come out in order; partial input waits.
        let commands = all(b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\nGET k\r\n").expect("valid");
        assert_eq!(commands.len(), 3);
        assert_eq!(commands[1], vec![Bytes::from("SET"), Bytes::from("k"), Bytes::from("v")]);
        assert_eq!(commands[2], vec![Bytes::from("GET"), Bytes::from("k")]);
        let mut partial = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\n"[..]);
        assert_eq!(parse(&mut partial), Ok(None));
        assert_eq!(partial.len(), 17, "an incomplete request is not consumed");
        assert_eq!(all(b"set \"a b\" 'c'\n").expect("quoted")[0][1], Bytes::from("a b"));
    }

    #[test]
    fn malformed_input_is_a_typed_error() {
        assert_eq!(all(b"*x\r\n"), Err(RespError::BadLength("multibulk")));
        assert_eq!(all(b"*1\r\n:5\r\n"), Err(RespError::ExpectedBulk(':')));
        assert_eq!(all(b"*1\r\n$1\r\nab\r\n"), Err(RespError::MissingCrlf));
        assert_eq!(all(b"*1\r\n$-5\r\n"), Err(RespError::BadLength("bulk")));
        assert_eq!(all(b"set \"a\n"), Err(RespError::Quotes));
    }

    #[test]
    fn replies_encode_as_redis_does() {
        let mut out = Vec::new();
        Reply::Simple("OK").encode(&mut out);
        Reply::Bulk(None).encode(&mut out);
        Reply::Array(vec![Some(Bytes::from("a")), None]).encode(&mut out);
        Reply::Integer(-3).encode(&mut out);
        assert_eq!(out, b"+OK\r\n$-1\r\n*2\r\n$1\r\na\r\n$-1\r\n:-3\r\n");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]
        #[test]
        fn parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            // Goal: arbitrary bytes parse or fail with a typed error, never panic or loop.
            let _ = all(&bytes);
        }

        #[test]
        fn parser_never_panics_on_resp_like_input(parts in proptest::collection::vec(
            prop_oneof![Just("*".to_string()), Just("$".to_string()), Just("\r\n".to_string()),
                        Just("-1".to_string()), Just("3".to_string()), Just("abc".to_string()),
                        Just("\"".to_string()), Just(" ".to_string())], 0..40)) {
            // Goal: near-valid input (the interesting part of the space) never panics either.
            let _ = all(parts.concat().as_bytes());
        }

        #[test]
        fn encoded_requests_round_trip(args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6)) {
            // Goal: whatever the argument bytes, a RESP array parses back to them.
            let mut request = format!("*{}\r\n", args.len()).into_bytes();
            for arg in &args {
                request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                request.extend_from_slice(arg);
                request.extend_from_slice(b"\r\n");
            }
            let parsed = all(&request).expect("valid");
            prop_assert_eq!(parsed.len(), 1);
            let expected: Vec<Bytes> = args.into_iter().map(Bytes::from).collect();
            prop_assert_eq!(&parsed[0], &expected);
        }
    }
}
