//! RESP: a hand-written request parser (arrays of bulk strings, and inline commands for telnet
//! and nc) that handles pipelining, and the reply encoder for RESP2 and RESP3. Every malformed
//! input is a typed [`RespError`]; every length is bounded.
//!
//! Requests look the same in both versions; only replies differ. A [`Reply`] is built once, in
//! the richest shape Redis gives it (a map, a set, a double, a null), and [`Reply::encode`]
//! lowers it to RESP2 the way Redis does when the connection did not ask for RESP3 with HELLO.

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

fn parse_number(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Parses one request from the front of `buffer`, consuming it. `Ok(None)`: more bytes needed
/// (nothing consumed). An empty inline line yields an empty argument list. Stateless: a
/// connection that reads a request in many pieces uses a [`Parser`] instead.
pub fn parse(buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RespError> {
    Parser::default().parse(buffer)
}

/// A request parser that remembers how far it got into an incomplete request, so that each
/// byte of a request arriving in many reads is examined about once: re-parsing a partial
/// array from its start on every read would make a large pipeline that arrives slowly cost
/// time quadratic in its size.
///
/// Its state describes the front of the buffer it was last given; between calls the caller may
/// only append to that buffer (the parser alone consumes from it).
#[derive(Debug, Default)]
pub struct Parser {
    /// Elements of the array being read: none until its `*count` line is complete.
    count: Option<usize>,
    /// The argument spans read so far, as offsets into the buffer.
    spans: Vec<(usize, usize)>,
    /// Where the next element (its `$len` line) starts.
    at: usize,
    /// The current element's data span, once its `$len` line is read.
    bulk: Option<(usize, usize)>,
    /// Where the search for the current line's end resumes: everything before it was looked
    /// at and held no line end.
    scan: usize,
    /// Bytes looked at since the parser was made (the linear-work test reads it).
    examined: u64,
}

impl Parser {
    /// Bytes examined so far; about the input's length, however it was split into reads.
    pub fn examined(&self) -> u64 {
        self.examined
    }

    /// Parses one request from the front of `buffer`, consuming it, as [`parse`] does, but
    /// resuming where the previous call on the same, since appended to, buffer stopped.
    pub fn parse(&mut self, buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RespError> {
        let result = match buffer.first() {
            None => Ok(None),
            Some(b'*') => self.array(buffer),
            Some(_) => self.inline(buffer),
        };
        if !matches!(result, Ok(None)) {
            // A request was consumed or the connection is closing: start afresh.
            let examined = self.examined;
            *self = Parser { examined, ..Parser::default() };
        }
        result
    }

    /// The end of the line starting at `line` (the offset of its `\r` for `crlf`, of its `\n`
    /// otherwise), searched for from `start` on but only in bytes not searched before. A line
    /// longer than [`LINE_MAX`] is an error.
    fn line_end(&mut self, buffer: &[u8], line: usize, start: usize, crlf: bool) -> Result<Option<usize>, RespError> {
        let from = self.scan.max(start);
        let found = if crlf {
            buffer.get(from..).and_then(|rest| rest.windows(2).position(|w| w == b"\r\n"))
        } else {
            buffer.get(from..).and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        };
        let Some(offset) = found else {
            self.examined += buffer.len().saturating_sub(from) as u64;
            // A `\r` as the last byte may be followed by its `\n` in the next read.
            self.scan = buffer.len().saturating_sub(1).max(start);
            return if buffer.len() - line > LINE_MAX { Err(RespError::LineTooLong) } else { Ok(None) };
        };
        self.examined += offset as u64 + 2;
        self.scan = 0;
        Ok(Some(from + offset))
    }

    fn array(&mut self, buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RespError> {
        let count = match self.count {
            Some(count) => count,
            None => {
                let Some(end) = self.line_end(buffer, 0, 1, true)? else { return Ok(None) };
                let count = parse_number(&buffer[1..end]).ok_or(RespError::BadLength("multibulk"))?;
                if count > ARGS_MAX as i64 {
                    return Err(RespError::BadLength("multibulk"));
                }
                let count = count.max(0) as usize;
                self.spans = Vec::with_capacity(count.min(1_024));
                self.at = end + 2;
                self.count = Some(count);
                count
            }
        };
        while self.spans.len() < count {
            let Some((start, stop)) = self.bulk_span(buffer)? else { return Ok(None) };
            if buffer.len() < stop + 2 {
                return Ok(None);
            }
            self.examined += 2;
            if &buffer[stop..stop + 2] != b"\r\n" {
                return Err(RespError::MissingCrlf);
            }
            self.spans.push((start, stop));
            self.bulk = None;
            self.at = stop + 2;
        }
        let frozen = buffer.split_to(self.at).freeze();
        Ok(Some(self.spans.drain(..).map(|(start, stop)| frozen.slice(start..stop)).collect()))
    }

    /// The data span of the element at `self.at`, reading its `$len` line if not done yet.
    fn bulk_span(&mut self, buffer: &[u8]) -> Result<Option<(usize, usize)>, RespError> {
        if let Some(span) = self.bulk {
            return Ok(Some(span));
        }
        let at = self.at;
        let Some(&tag) = buffer.get(at) else { return Ok(None) };
        if tag != b'$' {
            return Err(RespError::ExpectedBulk(tag as char));
        }
        let Some(line_end) = self.line_end(buffer, at, at + 1, true)? else { return Ok(None) };
        let len = parse_number(&buffer[at + 1..line_end]).ok_or(RespError::BadLength("bulk"))?;
        if len < 0 || len as usize > BULK_LEN_MAX {
            return Err(RespError::BadLength("bulk"));
        }
        let start = line_end + 2;
        self.bulk = Some((start, start + len as usize));
        Ok(self.bulk)
    }

    fn inline(&mut self, buffer: &mut BytesMut) -> Result<Option<Vec<Bytes>>, RespError> {
        let Some(end) = self.line_end(buffer, 0, 0, false)? else { return Ok(None) };
        if end > LINE_MAX {
            return Err(RespError::LineTooLong);
        }
        let line = buffer.split_to(end + 1);
        let text = line[..end].strip_suffix(b"\r").unwrap_or(&line[..end]);
        split_inline(text).map(Some)
    }
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

/// The reply protocol a connection speaks, chosen with `HELLO 2|3` (RESP2 until then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RespVersion {
    /// RESP2: maps and sets become flat arrays, doubles and verbatim text bulk strings, nulls `$-1`.
    #[default]
    Resp2,
    /// RESP3: typed maps (`%`), sets (`~`), doubles (`,`), verbatim strings (`=`) and null (`_`).
    Resp3,
}

impl RespVersion {
    /// The number HELLO and `CLIENT LIST`'s `resp=` field use.
    pub fn number(self) -> i64 {
        match self {
            RespVersion::Resp2 => 2,
            RespVersion::Resp3 => 3,
        }
    }
}

/// A reply, in the shape Redis gives it under RESP3; [`Reply::encode`] lowers it for RESP2.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+text`
    Simple(&'static str),
    /// `-text`
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$len bytes`, or a null.
    Bulk(Option<Bytes>),
    /// `*n` of bulk strings or nulls.
    Array(Vec<Option<Bytes>>),
    /// `*n` of replies.
    Nested(Vec<Reply>),
    /// A null array: RESP2 `*-1` (what EXEC answers when a transaction was aborted), RESP3 `_`.
    NullArray,
    /// RESP3 `%n` of key/value pairs; RESP2 a flat array of 2n (HGETALL, CONFIG GET, HELLO).
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n`; RESP2 an array (what Redis does for SMEMBERS and the like).
    Set(Vec<Reply>),
    /// RESP3 `*n` of two-element arrays; RESP2 one flat array of 2n (what Redis 7 does for
    /// ZRANGE WITHSCORES and ZPOPMIN with a count).
    Pairs(Vec<(Reply, Reply)>),
    /// RESP3 `,x`; RESP2 the same text as a bulk string. `inf`, `-inf` and `nan` as Redis spells them.
    Double(f64),
    /// RESP3 `=len` with the `txt:` format prefix; RESP2 a bulk string (INFO, CLIENT LIST).
    Verbatim(String),
}

impl Reply {
    /// A bulk string of `text`.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Some(Bytes::from(text.into())))
    }

    /// Appends the reply's encoding in `version` to `out`.
    pub fn encode(&self, version: RespVersion, out: &mut Vec<u8>) {
        let resp3 = version == RespVersion::Resp3;
        match self {
            Reply::Simple(text) => line(out, b'+', text.as_bytes()),
            // An error line must not contain CR or LF.
            Reply::Error(text) => line(
                out,
                b'-',
                &text.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect::<Vec<u8>>(),
            ),
            Reply::Integer(n) => line(out, b':', n.to_string().as_bytes()),
            Reply::Bulk(value) => encode_bulk(value.as_deref(), version, out),
            Reply::Array(values) => {
                header(out, b'*', values.len());
                values.iter().for_each(|v| encode_bulk(v.as_deref(), version, out));
            }
            Reply::Nested(replies) => {
                header(out, b'*', replies.len());
                replies.iter().for_each(|r| r.encode(version, out));
            }
            Reply::NullArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Map(pairs) => {
                if resp3 {
                    header(out, b'%', pairs.len())
                } else {
                    header(out, b'*', 2 * pairs.len())
                }
                for (key, value) in pairs {
                    key.encode(version, out);
                    value.encode(version, out);
                }
            }
            Reply::Set(members) => {
                header(out, if resp3 { b'~' } else { b'*' }, members.len());
                members.iter().for_each(|m| m.encode(version, out));
            }
            Reply::Pairs(pairs) => {
                header(out, b'*', if resp3 { pairs.len() } else { 2 * pairs.len() });
                for (first, second) in pairs {
                    if resp3 {
                        header(out, b'*', 2);
                    }
                    first.encode(version, out);
                    second.encode(version, out);
                }
            }
            Reply::Double(value) if resp3 => line(out, b',', format_double(*value).as_bytes()),
            Reply::Double(value) => encode_bulk(Some(format_double(*value).as_bytes()), version, out),
            Reply::Verbatim(text) if resp3 => {
                header(out, b'=', text.len() + 4);
                out.extend_from_slice(b"txt:");
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim(text) => encode_bulk(Some(text.as_bytes()), version, out),
        }
    }
}

/// Redis' spelling of a double: the shortest text that reads back as the same value (Redis 7.2's
/// `fpconv_dtoa`; Rust's `Display` gives the same digits), and `inf`, `-inf`, `nan`.
fn format_double(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        value.to_string()
    }
}

fn line(out: &mut Vec<u8>, tag: u8, text: &[u8]) {
    out.push(tag);
    out.extend_from_slice(text);
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, tag: u8, len: usize) {
    line(out, tag, len.to_string().as_bytes());
}

fn encode_bulk(value: Option<&[u8]>, version: RespVersion, out: &mut Vec<u8>) {
    match value {
        None if version == RespVersion::Resp3 => out.extend_from_slice(b"_\r\n"),
        None => out.extend_from_slice(b"$-1\r\n"),
        Some(bytes) => {
            header(out, b'$', bytes.len());
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
    fn a_request_arriving_a_byte_at_a_time_is_examined_about_once() {
        // Goal: incremental parsing. A 20,000-argument array (and a long inline command) fed
        // one byte per read parses to the same words as in one read, with the bytes examined
        // growing linearly with the input (re-scanning from the start on each read would
        // examine about n²/2 = 10¹⁰ bytes here). Method: count the parser's examined bytes.
        let mut request = b"*20000\r\n".to_vec();
        for i in 0..20_000 {
            let word = format!("w{i}");
            request.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
        }
        let inline = format!("SET k {}\r\n", "v".repeat(30_000));
        for input in [request, inline.into_bytes()] {
            let mut parser = Parser::default();
            let mut buffer = BytesMut::new();
            let mut parsed = None;
            for &byte in &input {
                assert!(parsed.is_none(), "nothing parses before the last byte");
                buffer.extend_from_slice(&[byte]);
                parsed = parser.parse(&mut buffer).expect("valid");
            }
            assert_eq!(parsed, all(&input).expect("valid").pop(), "the same words as in one read");
            assert!(buffer.is_empty(), "the request was consumed");
            let examined = parser.examined();
            assert!(examined <= 3 * input.len() as u64, "{examined} bytes examined for {} of input", input.len());
        }
    }

    #[test]
    fn a_parser_resumes_across_pipelined_requests_split_anywhere() {
        // Goal: the parser's saved position never outlives its request. Method: a pipeline of
        // arrays and inline commands, fed in 3-byte reads, parses to what one read gives.
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*1\r\n$4\r\nPING\r\n*0\r\n*3\r\n$3\r\nSET\r\n$0\r\n\r\n$2\r\nab\r\n";
        let (mut parser, mut buffer, mut commands) = (Parser::default(), BytesMut::new(), Vec::new());
        for piece in input.chunks(3) {
            buffer.extend_from_slice(piece);
            while let Some(command) = parser.parse(&mut buffer).expect("valid") {
                commands.push(command);
            }
        }
        assert_eq!(commands, all(input).expect("valid"));
        assert_eq!(commands.len(), 5);
    }

    fn encoded(reply: &Reply, version: RespVersion) -> String {
        let mut out = Vec::new();
        reply.encode(version, &mut out);
        String::from_utf8(out).expect("test replies are text")
    }

    #[test]
    fn replies_encode_as_redis_does() {
        // Goal: RESP2 bytes are what redis-server 7 sends for the same replies.
        let mut out = Vec::new();
        Reply::Simple("OK").encode(RespVersion::Resp2, &mut out);
        Reply::Bulk(None).encode(RespVersion::Resp2, &mut out);
        Reply::Array(vec![Some(Bytes::from("a")), None]).encode(RespVersion::Resp2, &mut out);
        Reply::Integer(-3).encode(RespVersion::Resp2, &mut out);
        assert_eq!(out, b"+OK\r\n$-1\r\n*2\r\n$1\r\na\r\n$-1\r\n:-3\r\n");
        assert_eq!(encoded(&Reply::Error("ERR a\r\nb".into()), RespVersion::Resp3), "-ERR a  b\r\n");
    }

    #[test]
    fn resp3_types_encode_as_redis_does_and_lower_to_resp2() {
        // Goal: each RESP3 type has Redis' RESP3 bytes (checked against redis-server 7.0.15 with
        // HELLO 3) and Redis' RESP2 lowering. Method: encode each reply in both versions.
        let map = Reply::Map(vec![(Reply::text("a"), Reply::text("1")), (Reply::text("n"), Reply::Integer(2))]);
        assert_eq!(encoded(&map, RespVersion::Resp3), "%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nn\r\n:2\r\n");
        assert_eq!(encoded(&map, RespVersion::Resp2), "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nn\r\n:2\r\n");
        let set = Reply::Set(vec![Reply::text("x")]);
        assert_eq!(encoded(&set, RespVersion::Resp3), "~1\r\n$1\r\nx\r\n");
        assert_eq!(encoded(&set, RespVersion::Resp2), "*1\r\n$1\r\nx\r\n");
        assert_eq!(encoded(&Reply::Bulk(None), RespVersion::Resp3), "_\r\n");
        assert_eq!(encoded(&Reply::Array(vec![None]), RespVersion::Resp3), "*1\r\n_\r\n");
        assert_eq!(encoded(&Reply::NullArray, RespVersion::Resp3), "_\r\n");
        assert_eq!(encoded(&Reply::NullArray, RespVersion::Resp2), "*-1\r\n");
        assert_eq!(encoded(&Reply::Double(1.5), RespVersion::Resp3), ",1.5\r\n");
        assert_eq!(encoded(&Reply::Double(3.0), RespVersion::Resp2), "$1\r\n3\r\n");
        assert_eq!(encoded(&Reply::Double(f64::NEG_INFINITY), RespVersion::Resp3), ",-inf\r\n");
        assert_eq!(encoded(&Reply::Double(f64::NAN), RespVersion::Resp3), ",nan\r\n");
        assert_eq!(encoded(&Reply::Verbatim("id=1\n".into()), RespVersion::Resp3), "=9\r\ntxt:id=1\n\r\n");
        assert_eq!(encoded(&Reply::Verbatim("id=1\n".into()), RespVersion::Resp2), "$5\r\nid=1\n\r\n");
        let nested = Reply::Nested(vec![Reply::Map(Vec::new()), Reply::Bulk(None)]);
        assert_eq!(encoded(&nested, RespVersion::Resp3), "*2\r\n%0\r\n_\r\n");
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
