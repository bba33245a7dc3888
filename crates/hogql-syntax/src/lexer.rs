//! HogQL's lexer: query text to tokens. Pure (std only).
//!
//! Keywords are not special here: every bare word is a [`TokenKind::Word`] and the parser
//! decides (case-insensitively) what it means in context. Quoted identifiers
//! (`` `x` ``, `"x"`) are [`TokenKind::QuotedIdent`] and are never keywords.

use std::fmt;

/// A syntax error with its place in the query text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
    /// Byte offsets `[start, end)` of the offending text.
    pub start: usize,
    pub end: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl SyntaxError {
    /// An error at byte offsets `[start, end)` of `text`; line and column are computed.
    pub fn at(text: &str, start: usize, end: usize, message: impl Into<String>) -> Self {
        let start = floor_char_boundary(text, start.min(text.len()));
        let end = end.max(start).min(text.len());
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let column = text[line_start..start].chars().count() + 1;
        SyntaxError {
            message: message.into(),
            start,
            end,
            line,
            column,
        }
    }
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Syntax error at line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for SyntaxError {}

#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// A bare word: a keyword or an identifier (`event`, `SELECT`, `$browser`).
    Word(String),
    /// `` `name` `` or `"name"`, unescaped.
    QuotedIdent(String),
    /// A number as written: `1`, `1.5`, `.5`, `1e3`, `0x1F`, `0b101`.
    Number(String),
    /// A single-quoted string, unescaped.
    String(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Dot,
    Semicolon,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    /// `||`
    Concat,
    /// `->`
    Arrow,
    /// `?`
    Question,
    /// `??`
    Coalesce,
    /// `?.` (PostHog's null-safe access)
    NullDot,
    /// `:`
    Colon,
    /// `::`
    DoubleColon,
    /// `=` or `==`
    Eq,
    /// `!=` or `<>`
    NotEq,
    Lt,
    LtEq,
    Gt,
    GtEq,
    /// `=~` or `~`
    Regex,
    /// `!~`
    NotRegex,
    /// `=~*` or `~*`
    IRegex,
    /// `!~*`
    NotIRegex,
    /// `#3`: a positional reference (PostHog's grammar), its digits as written.
    Positional(String),
    /// `f'` opening a template string (`f'hello {event}'`).
    TemplateOpen,
    /// A piece of a template string's text, escapes decoded.
    TemplateText(String),
    /// `{` opening an expression inside a template string.
    TemplateExprOpen,
    /// `}` closing it.
    TemplateExprClose,
    /// `'` closing a template string.
    TemplateClose,
    Eof,
}

/// Where the lexer is inside template strings: their text, or an expression in one (with
/// the depth of `{` opened inside it).
enum Mode {
    Text,
    Expr(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub start: usize,
    pub end: usize,
}

impl Token {
    /// Whether this is the bare word `kw` (case-insensitive).
    pub fn is_word(&self, kw: &str) -> bool {
        matches!(&self.kind, TokenKind::Word(w) if w.eq_ignore_ascii_case(kw))
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Whether `name` can be written without quotes as far as characters go.
pub fn is_plain_identifier(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && is_ident_start(b[0]) && b.iter().all(|&c| is_ident_char(c))
}

/// Split `text` into tokens; the last one is always [`TokenKind::Eof`].
pub fn tokenize(text: &str) -> Result<Vec<Token>, SyntaxError> {
    Lexer {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        tokens: Vec::new(),
        modes: Vec::new(),
    }
    .run()
}

struct Lexer<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    tokens: Vec<Token>,
    /// Open template strings, innermost last (a stack, not recursion).
    modes: Vec<Mode>,
}

impl Lexer<'_> {
    fn err(&self, start: usize, end: usize, msg: impl Into<String>) -> SyntaxError {
        SyntaxError::at(self.text, start, end, msg)
    }

    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: TokenKind, start: usize) {
        self.tokens.push(Token {
            kind,
            start,
            end: self.pos,
        });
    }

    /// The previous token ends an operand and touches `pos`: a `.` here is member access.
    fn dot_is_access(&self) -> bool {
        match self.tokens.last() {
            Some(t) if t.end == self.pos => matches!(
                t.kind,
                TokenKind::Word(_)
                    | TokenKind::QuotedIdent(_)
                    | TokenKind::Number(_)
                    | TokenKind::String(_)
                    | TokenKind::RParen
                    | TokenKind::RBracket
                    | TokenKind::RBrace
            ),
            _ => false,
        }
    }

    /// A piece of template text from `self.pos`, up to a `{` (an expression follows) or the
    /// closing `'`.
    fn template_text(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        let (text, end, brace) = self.quoted_body(start, start, b'\'', "template string", true)?;
        if !text.is_empty() {
            self.pos = end;
            self.push(TokenKind::TemplateText(text), start);
        }
        self.pos = end + 1;
        if brace {
            self.push(TokenKind::TemplateExprOpen, end);
            self.modes.push(Mode::Expr(0));
        } else {
            self.push(TokenKind::TemplateClose, end);
            self.modes.pop();
        }
        Ok(())
    }

    fn run(mut self) -> Result<Vec<Token>, SyntaxError> {
        loop {
            if matches!(self.modes.last(), Some(Mode::Text)) {
                self.template_text()?;
                continue;
            }
            self.skip_trivia()?;
            let start = self.pos;
            if start >= self.bytes.len() {
                if !self.modes.is_empty() {
                    return Err(self.err(start, start, "unterminated template string"));
                }
                self.push(TokenKind::Eof, start);
                return Ok(self.tokens);
            }
            let b = self.bytes[start];
            let c1 = self.at(start + 1);
            let c2 = self.at(start + 2);
            if b == b'f' && c1 == b'\'' {
                self.pos = start + 2;
                self.push(TokenKind::TemplateOpen, start);
                self.modes.push(Mode::Text);
                continue;
            }
            if let Some(Mode::Expr(depth)) = self.modes.last_mut() {
                match b {
                    b'{' => *depth += 1,
                    b'}' if *depth == 0 => {
                        self.modes.pop();
                        self.pos = start + 1;
                        self.push(TokenKind::TemplateExprClose, start);
                        continue;
                    }
                    b'}' => *depth -= 1,
                    _ => {}
                }
            }
            let (kind, len) = match b {
                b'(' => (TokenKind::LParen, 1),
                b')' => (TokenKind::RParen, 1),
                b'[' => (TokenKind::LBracket, 1),
                b']' => (TokenKind::RBracket, 1),
                b'{' => (TokenKind::LBrace, 1),
                b'}' => (TokenKind::RBrace, 1),
                b',' => (TokenKind::Comma, 1),
                b';' => (TokenKind::Semicolon, 1),
                b'+' => (TokenKind::Plus, 1),
                b'*' => (TokenKind::Star, 1),
                b'/' => (TokenKind::Slash, 1),
                b'%' => (TokenKind::Percent, 1),
                b'-' if c1 == b'>' => (TokenKind::Arrow, 2),
                b'-' => (TokenKind::Minus, 1),
                b'|' if c1 == b'|' => (TokenKind::Concat, 2),
                b'?' if c1 == b'?' => (TokenKind::Coalesce, 2),
                b'?' if c1 == b'.' => (TokenKind::NullDot, 2),
                b'?' => (TokenKind::Question, 1),
                b':' if c1 == b':' => (TokenKind::DoubleColon, 2),
                b':' => (TokenKind::Colon, 1),
                b'=' if c1 == b'~' && c2 == b'*' => (TokenKind::IRegex, 3),
                b'=' if c1 == b'~' => (TokenKind::Regex, 2),
                b'=' if c1 == b'=' => (TokenKind::Eq, 2),
                b'=' => (TokenKind::Eq, 1),
                b'!' if c1 == b'~' && c2 == b'*' => (TokenKind::NotIRegex, 3),
                b'!' if c1 == b'~' => (TokenKind::NotRegex, 2),
                b'!' if c1 == b'=' => (TokenKind::NotEq, 2),
                b'~' if c1 == b'*' => (TokenKind::IRegex, 2),
                b'~' => (TokenKind::Regex, 1),
                b'<' if c1 == b'=' => (TokenKind::LtEq, 2),
                b'<' if c1 == b'>' => (TokenKind::NotEq, 2),
                b'<' => (TokenKind::Lt, 1),
                b'>' if c1 == b'=' => (TokenKind::GtEq, 2),
                b'>' => (TokenKind::Gt, 1),
                b'.' if c1.is_ascii_digit() && !self.dot_is_access() => {
                    self.number(false)?;
                    continue;
                }
                b'.' => (TokenKind::Dot, 1),
                b'#' if c1.is_ascii_digit() => {
                    let mut end = start + 1;
                    while end < self.bytes.len() && self.bytes[end].is_ascii_digit() {
                        end += 1;
                    }
                    self.pos = end;
                    let digits = self.text[start + 1..end].to_string();
                    self.push(TokenKind::Positional(digits), start);
                    continue;
                }
                b'0'..=b'9' => {
                    let after_dot = matches!(
                        self.tokens.last(),
                        Some(Token { kind: TokenKind::Dot | TokenKind::NullDot, end, .. })
                            if *end == start
                    );
                    self.number(after_dot)?;
                    continue;
                }
                b'\'' => {
                    let s = self.quoted(b'\'', "string literal")?;
                    self.push(TokenKind::String(s), start);
                    continue;
                }
                b'`' | b'"' => {
                    let s = self.quoted(b, "quoted identifier")?;
                    self.push(TokenKind::QuotedIdent(s), start);
                    continue;
                }
                b if is_ident_start(b) => {
                    let mut end = start;
                    while end < self.bytes.len() && is_ident_char(self.bytes[end]) {
                        end += 1;
                    }
                    self.pos = end;
                    self.push(TokenKind::Word(self.text[start..end].to_string()), start);
                    continue;
                }
                _ => {
                    let ch = self.text[start..].chars().next().unwrap_or('?');
                    return Err(self.err(
                        start,
                        start + ch.len_utf8(),
                        format!("unexpected character '{ch}'"),
                    ));
                }
            };
            self.pos = start + len;
            self.push(kind, start);
        }
    }

    fn skip_trivia(&mut self) -> Result<(), SyntaxError> {
        loop {
            let b = self.at(self.pos);
            if self.pos < self.bytes.len()
                && matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
            {
                self.pos += 1;
            } else if (b == b'-' && self.at(self.pos + 1) == b'-')
                || (b == b'/' && self.at(self.pos + 1) == b'/')
            {
                while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
                    self.pos += 1;
                }
            } else if b == b'/' && self.at(self.pos + 1) == b'*' {
                let start = self.pos;
                match self.text[start + 2..].find("*/") {
                    Some(i) => self.pos = start + 2 + i + 2,
                    None => {
                        return Err(self.err(start, start + 2, "unterminated comment '/*'"));
                    }
                }
            } else {
                return Ok(());
            }
        }
    }

    /// A number literal. Right after a `.` (tuple access, `t.1.2`) only digits are taken.
    fn number(&mut self, after_dot: bool) -> Result<(), SyntaxError> {
        let start = self.pos;
        let b = self.bytes;
        let mut i = start;
        let digits = |mut i: usize, ok: fn(u8) -> bool| {
            while i < b.len() && ok(b[i]) {
                i += 1;
            }
            i
        };
        if after_dot {
            i = digits(i, |c| c.is_ascii_digit());
        } else if b[i] == b'0' && matches!(self.at(i + 1), b'x' | b'X') {
            i = digits(i + 2, |c| c.is_ascii_hexdigit());
            if i == start + 2 {
                return Err(self.err(start, i, "invalid hexadecimal number: no digits after '0x'"));
            }
        } else if b[i] == b'0'
            && matches!(self.at(i + 1), b'b' | b'B')
            && matches!(self.at(i + 2), b'0' | b'1')
        {
            i = digits(i + 2, |c| c == b'0' || c == b'1');
        } else {
            i = digits(i, |c| c.is_ascii_digit());
            if self.at(i) == b'.' {
                i = digits(i + 1, |c| c.is_ascii_digit());
            }
            if matches!(self.at(i), b'e' | b'E') {
                let mut j = i + 1;
                if matches!(self.at(j), b'+' | b'-') {
                    j += 1;
                }
                if self.at(j).is_ascii_digit() {
                    i = digits(j, |c| c.is_ascii_digit());
                }
            }
        }
        if i < b.len() && is_ident_char(b[i]) {
            let mut end = i;
            while end < b.len() && is_ident_char(b[end]) {
                end += 1;
            }
            return Err(self.err(
                start,
                end,
                format!("invalid number literal '{}'", &self.text[start..end]),
            ));
        }
        self.pos = i;
        self.push(TokenKind::Number(self.text[start..i].to_string()), start);
        Ok(())
    }

    /// A quoted string or identifier starting at `self.pos` with quote `q`. Doubling the
    /// quote and ClickHouse's backslash escapes are understood.
    fn quoted(&mut self, q: u8, what: &str) -> Result<String, SyntaxError> {
        let start = self.pos;
        let (out, end, _) = self.quoted_body(start, start + 1, q, what, false)?;
        self.pos = end + 1;
        Ok(out)
    }

    /// The text from byte `from` up to the closing quote `q` (or, in a template, a `{`),
    /// escapes decoded; with the offset of that quote (or brace) and whether it was a brace.
    /// `start` is where the literal began, for errors.
    fn quoted_body(
        &self,
        start: usize,
        from: usize,
        q: u8,
        what: &str,
        template: bool,
    ) -> Result<(String, usize, bool), SyntaxError> {
        let b = self.bytes;
        let mut out: Vec<u8> = Vec::new();
        let mut i = from;
        let mut brace = false;
        loop {
            if i >= b.len() {
                return Err(self.err(start, b.len(), format!("unterminated {what}")));
            }
            let c = b[i];
            if template && c == b'{' {
                brace = true;
                break;
            }
            if template && c == b'\\' && self.at(i + 1) == b'{' {
                out.push(b'{');
                i += 2;
                continue;
            }
            if c == q {
                if self.at(i + 1) == q {
                    out.push(q);
                    i += 2;
                    continue;
                }
                break;
            }
            if c == b'\\' {
                if i + 1 >= b.len() {
                    return Err(self.err(start, b.len(), format!("unterminated {what}")));
                }
                let e = b[i + 1];
                i += 2;
                match e {
                    b'n' => out.push(b'\n'),
                    b't' => out.push(b'\t'),
                    b'r' => out.push(b'\r'),
                    b'0' => out.push(0),
                    b'a' => out.push(0x07),
                    b'b' => out.push(0x08),
                    b'e' => out.push(0x1b),
                    b'f' => out.push(0x0c),
                    b'v' => out.push(0x0b),
                    b'N' => {}
                    b'\\' | b'\'' | b'"' | b'`' => out.push(e),
                    b'x' => {
                        let hex = |c: u8| (c as char).to_digit(16);
                        match (hex(self.at(i)), hex(self.at(i + 1))) {
                            (Some(h), Some(l)) => {
                                out.push((h * 16 + l) as u8);
                                i += 2;
                            }
                            _ => {
                                return Err(self.err(
                                    i - 2,
                                    (i + 2).min(b.len()),
                                    "invalid escape: '\\x' must be followed by two hex digits",
                                ));
                            }
                        }
                    }
                    _ => {
                        // Unknown escapes keep their backslash, as ClickHouse does.
                        out.push(b'\\');
                        i -= 1;
                    }
                }
                continue;
            }
            out.push(c);
            i += 1;
        }
        let text = String::from_utf8(out)
            .map_err(|_| self.err(start, i, format!("{what} is not valid UTF-8")))?;
        Ok((text, i, brace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<TokenKind> {
        tokenize(s).unwrap().into_iter().map(|t| t.kind).collect()
    }

    fn word(s: &str) -> TokenKind {
        TokenKind::Word(s.into())
    }

    fn num(s: &str) -> TokenKind {
        TokenKind::Number(s.into())
    }

    #[test]
    fn numbers_and_tuple_access() {
        use TokenKind::*;
        assert_eq!(
            kinds("1 1.5 .5 1e3 1.5e-3 0x1F 0b101 1."),
            vec![
                num("1"),
                num("1.5"),
                num(".5"),
                num("1e3"),
                num("1.5e-3"),
                num("0x1F"),
                num("0b101"),
                num("1."),
                Eof
            ]
        );
        assert_eq!(
            kinds("t.1.2"),
            vec![word("t"), Dot, num("1"), Dot, num("2"), Eof]
        );
        assert_eq!(
            kinds("(a).1 x[1].2"),
            vec![
                LParen,
                word("a"),
                RParen,
                Dot,
                num("1"),
                word("x"),
                LBracket,
                num("1"),
                RBracket,
                Dot,
                num("2"),
                Eof
            ]
        );
        assert_eq!(kinds("SELECT .5"), vec![word("SELECT"), num(".5"), Eof]);
        assert!(tokenize("SELECT 1abc").is_err());
        assert!(tokenize("0x").is_err());
    }

    #[test]
    fn operators() {
        use TokenKind::*;
        assert_eq!(
            kinds("-> - ?? ? :: : =~* =~ == = !~* !~ != <> <= < >= > || ~ ~*"),
            vec![
                Arrow,
                Minus,
                Coalesce,
                Question,
                DoubleColon,
                Colon,
                IRegex,
                Regex,
                Eq,
                Eq,
                NotIRegex,
                NotRegex,
                NotEq,
                NotEq,
                LtEq,
                Lt,
                GtEq,
                Gt,
                Concat,
                Regex,
                IRegex,
                Eof
            ]
        );
    }

    #[test]
    fn strings_and_identifiers() {
        use TokenKind::*;
        assert_eq!(
            kinds(r"'it''s' 'a\'b' '\n\t\\' '\x41\x42' '\%' '\N'"),
            vec![
                String("it's".into()),
                String("a'b".into()),
                String("\n\t\\".into()),
                String("AB".into()),
                String("\\%".into()),
                String("".into()),
                Eof
            ]
        );
        assert_eq!(
            kinds(r#"`a``b` "my col" "a""b" "a\"b" $session_id properties.$browser"#),
            vec![
                QuotedIdent("a`b".into()),
                QuotedIdent("my col".into()),
                QuotedIdent("a\"b".into()),
                QuotedIdent("a\"b".into()),
                word("$session_id"),
                word("properties"),
                Dot,
                word("$browser"),
                Eof
            ]
        );
        assert_eq!(kinds("'€'"), vec![String("€".into()), Eof]);
        assert!(tokenize(r"'\xff'").is_err());
        assert!(tokenize(r"'\xZ1'").is_err());
    }

    #[test]
    fn comments_and_errors() {
        use TokenKind::*;
        assert_eq!(
            kinds("a -- c\n/* x\n y */ b"),
            vec![word("a"), word("b"), Eof]
        );
        let e = tokenize("SELECT\n  #x").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        assert!(e.message.contains("'#'"), "{e}");
        let e = tokenize("SELECT 'abc").unwrap_err();
        assert_eq!((e.line, e.column), (1, 8));
        assert!(e.message.contains("unterminated string"), "{e}");
        let e = tokenize("/* x").unwrap_err();
        assert!(e.message.contains("unterminated comment"), "{e}");
        let e = tokenize("'é' é").unwrap_err();
        assert_eq!(e.column, 5);
        assert_eq!(
            e.to_string(),
            "Syntax error at line 1, column 5: unexpected character 'é'"
        );
    }
}
