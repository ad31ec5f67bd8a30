use super::*;

/// Deterministic xorshift so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// Characters from every class the split patterns distinguish (Lu, Ll, Lt, Lm, Lo, M, N,
/// whitespace kinds, CR/LF, apostrophes and contraction letters, symbols, emoji).
const ALPHABET: &[char] = &[
    'a', 'b', 'Z', 'Q', 'é', 'É', 'ǅ', 'ʰ', '中', '文', 'ا', 'ש', '\u{301}', '\u{94d}', '1', '7',
    '٣', '½', 'Ⅻ', ' ', ' ', '\t', '\n', '\r', '\u{a0}', '\u{3000}', '\u{2028}', '\'', 's', 'S',
    't', 'l', 'L', 'r', 'e', 'v', 'm', 'd', 'ſ', '!', '/', '(', '.', '<', '|', '>', '-', '_', '😀',
    '\u{200d}', '\u{fe0f}', 'ß', 'ﬁ',
];

fn regex_pieces(re: &fancy_regex::Regex, text: &str) -> Vec<String> {
    re.find_iter(text)
        .map(|m| m.expect("regex runs").as_str().to_owned())
        .collect()
}

fn ours(text: &str, pattern: Pattern) -> Vec<String> {
    pretokenize::pieces(text, pattern)
        .map(str::to_owned)
        .collect()
}

const SAMPLES: &[&str] = &[
    "Hello world! It's a test, isn't it? I'LL be there; we'VE seen 12345 things.",
    "  leading spaces\n\n  and   trailing   \n",
    "fn main() {\n    println!(\"{}\", x /* c */); // done\r\n}\n",
    "HTTPServer parseJSON iPhone McDonald's ÉCOLE élève",
    "日本語のテキストと中文文本，以及한국어。",
    "مرحبا بالعالم שלום עולם",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇳🇿",
    "<|endoftext|> <|im_start|>user<|im_sep|>hi<|im_end|>",
    "path/to/file.rs:10:5\n//comment\n///doc",
    "1234567890 3.14159 1,000,000 ٣٤٥",
    "e\u{301}te\u{301} a\u{300}\u{301}b \u{301}start",
    "tab\there\u{a0}nbsp\u{3000}ideographic",
    "",
    " ",
    "\n",
    "a",
];

#[test]
fn splitting_matches_tiktoken_regexes_on_samples() {
    for pattern in [Pattern::Cl100k, Pattern::O200k] {
        let re = fancy_regex::Regex::new(pattern.regex()).unwrap();
        for text in SAMPLES {
            assert_eq!(
                ours(text, pattern),
                regex_pieces(&re, text),
                "{pattern:?} on {text:?}"
            );
        }
    }
}

#[test]
fn splitting_matches_tiktoken_regexes_on_random_text() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for pattern in [Pattern::Cl100k, Pattern::O200k] {
        let re = fancy_regex::Regex::new(pattern.regex()).unwrap();
        for _ in 0..4000 {
            let len = (rng.next() % 24) as usize;
            let text: String = (0..len).map(|_| rng.pick(ALPHABET)).collect();
            assert_eq!(
                ours(&text, pattern),
                regex_pieces(&re, &text),
                "{pattern:?} on {text:?}"
            );
        }
    }
}

/// A small vocabulary: every byte, then merges chosen so ties and chains happen.
fn toy_vocab() -> Vocab {
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    for merge in [
        "aa", "ab", "ba", "aaa", "th", "he", "the", " t", " the", "bb", "abab", "aab",
    ] {
        tokens.push(merge.as_bytes().to_vec());
    }
    tokens.extend((0..=255u8).map(|b| vec![b]));
    Vocab::from_tokens("toy", Pattern::O200k, tokens.iter().map(Vec::as_slice)).unwrap()
}

#[test]
fn heap_merge_equals_tiktoken_flat_merge() {
    let vocab = toy_vocab();
    let mut rng = Rng(42);
    for _ in 0..2000 {
        let len = 2 + (rng.next() % 300) as usize;
        let piece: Vec<u8> = (0..len).map(|_| rng.pick(b"aabbth e")).collect();
        let mut flat = Vec::new();
        let mut heap = Vec::new();
        bpe::test_support::encode_both(&vocab, &piece, &mut flat, &mut heap);
        assert_eq!(flat, heap, "piece {:?}", String::from_utf8_lossy(&piece));
        let decoded: Vec<u8> = flat.iter().flat_map(|&r| vocab.token(r).to_vec()).collect();
        assert_eq!(decoded, piece);
    }
}

#[test]
fn merge_takes_lowest_rank_leftmost_first() {
    let t = BpeTokenizer::new(toy_vocab()).unwrap();
    // "aaaa": "aa"(0) at 0 and at 2 win before "aaa"(3) could form.
    assert_eq!(t.encode("aaaa"), vec![0, 0]);
    assert_eq!(t.decode(&t.encode(" the aab")), " the aab");
    assert_eq!(t.count("aaaa"), 2);
}

#[test]
fn compact_form_round_trips_and_rejects_damage() {
    let vocab = toy_vocab();
    let bytes = vocab.to_compact();
    let back = Vocab::from_compact(&bytes).unwrap();
    assert_eq!(back.len(), vocab.len());
    assert_eq!(back.name(), "toy");
    assert_eq!(back.pattern(), Pattern::O200k);
    for r in 0..vocab.len() as u32 {
        assert_eq!(back.token(r), vocab.token(r));
        assert_eq!(back.rank(vocab.token(r)), Some(r));
    }
    assert_eq!(
        Vocab::from_compact(&bytes[..bytes.len() - 1]).unwrap_err(),
        VocabError::Truncated
    );
    assert_eq!(
        Vocab::from_compact(b"NOPE").unwrap_err(),
        VocabError::BadMagic
    );
}

#[test]
fn a_vocabulary_without_every_single_byte_is_refused_at_load() {
    let tokens: Vec<Vec<u8>> = (0..=255u8)
        .filter(|b| *b != b'A')
        .map(|b| vec![b])
        .collect();
    let vocab =
        Vocab::from_tokens("gap", Pattern::O200k, tokens.iter().map(Vec::as_slice)).unwrap();
    let compact = vocab.to_compact();
    assert_eq!(
        BpeTokenizer::new(vocab).unwrap_err(),
        VocabError::MissingByte(b'A')
    );
    // The loader the server and the worker use says so too, instead of panicking mid-count.
    assert!(matches!(
        crate::tokens::Tokenizer::load(&compact),
        Err(VocabError::MissingByte(0x41))
    ));
}

#[test]
fn tiktoken_format_parses_and_checks_ranks() {
    let ok = "YQ== 0\nYg== 1\nYWI= 2\n";
    let v = Vocab::from_tiktoken("t", Pattern::Cl100k, ok).unwrap();
    assert_eq!(v.rank(b"ab"), Some(2));
    assert_eq!(
        Vocab::from_tiktoken("t", Pattern::Cl100k, "YQ== 0\nYg== 5\n").unwrap_err(),
        VocabError::RankGap {
            expected: 1,
            found: 5
        }
    );
    assert_eq!(
        Vocab::from_tiktoken("t", Pattern::Cl100k, "YQ== 0\nYQ== 1\n").unwrap_err(),
        VocabError::Duplicate(1)
    );
    assert!(matches!(
        Vocab::from_tiktoken("t", Pattern::Cl100k, "garbage\n"),
        Err(VocabError::BadTiktokenLine { line: 1 })
    ));
}

#[test]
fn estimate_is_never_bytes() {
    assert_eq!(estimate("abcdefgh"), 2);
    assert_eq!(estimate("日本語"), 3); // 9 bytes, 3 characters
    assert_eq!(estimate(""), 0);
}

#[test]
fn content_key_differs_for_different_texts() {
    assert_ne!(content_key("a"), content_key("b"));
    assert_ne!(content_key(""), content_key("\0"));
    assert_eq!(content_key("same"), content_key("same"));
}

/// A vocabulary `cargo xtask build` wrote (`dist/vocab`, or `$GLASSBOX_E2E_WIDGET_DIR/vocab`).
fn built_vocabulary(encoding: &str) -> Tokenizer {
    let dir = std::env::var("GLASSBOX_E2E_WIDGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../dist").to_owned());
    let data = std::fs::read(format!("{dir}/vocab/{encoding}.gbv"))
        .expect("run `cargo xtask build` first (or set GLASSBOX_E2E_WIDGET_DIR)");
    Tokenizer::load(&data).unwrap()
}

/// OpenAI's cookbook "How to count tokens with tiktoken" (section 6, "Counting tokens for chat
/// completions API calls") counts its example conversation — a system prompt, four few-shot
/// messages with `name` fields, a user message — with `num_tokens_from_messages()` and prints the
/// count beside the API's own `usage.prompt_tokens`: 129 for `gpt-3.5-turbo`, `gpt-4-0613` and
/// `gpt-4` (cl100k_base), 124 for `gpt-4o` and `gpt-4o-mini` (o200k_base). Its rule: 3 tokens per
/// message, each value counted (the role included), 1 more for a name, 3 priming the reply.
#[test]
fn openai_framing_gives_the_cookbooks_published_counts() {
    // (role, name, content), as the cookbook writes them.
    let example: [(&str, Option<&str>, &str); 6] = [
        (
            "system",
            None,
            "You are a helpful, pattern-following assistant that translates corporate jargon \
             into plain English.",
        ),
        (
            "system",
            Some("example_user"),
            "New synergies will help drive top-line growth.",
        ),
        (
            "system",
            Some("example_assistant"),
            "Things working well together will increase revenue.",
        ),
        (
            "system",
            Some("example_user"),
            "Let's circle back when we have more bandwidth to touch base on opportunities for \
             increased leverage.",
        ),
        (
            "system",
            Some("example_assistant"),
            "Let's talk later when we're less busy about how to do better.",
        ),
        (
            "user",
            None,
            "This late pivot means we don't have time to boil the ocean for the client \
             deliverable.",
        ),
    ];
    for (encoding, published) in [("cl100k_base", 129), ("o200k_base", 124)] {
        let t = built_vocabulary(encoding);
        let count = |s: &str| t.count(s) as u32;
        // The name rule of the cookbook (we send no names): its tokens and one more.
        let name = |n: Option<&str>| n.map_or(0, |n| count(n) + 1);
        // The cookbook's function, as written: our tokenizer agrees with tiktoken here.
        let cookbook: u32 = example
            .iter()
            .map(|&(role, n, content)| 3 + count(role) + count(content) + name(n))
            .sum::<u32>()
            + 3;
        assert_eq!(cookbook, published, "{encoding}: the cookbook's rule");
        // Our framing, which does not count the role as text: every role we send is one token.
        for role in ["system", "user", "assistant", "tool"] {
            assert_eq!(count(role), 1, "{encoding}: {role}");
        }
        let framing = Framing::for_encoding(encoding);
        assert_eq!(framing, Framing::OPENAI);
        let ours: u32 = example
            .iter()
            .map(|&(_, n, content)| framing.per_message + count(content) + name(n))
            .sum::<u32>()
            + framing.reply_priming;
        assert_eq!(ours, published, "{encoding}: our framing");
    }
    // Other families keep the documented estimate.
    assert_eq!(Framing::for_encoding("llama3"), Framing::ESTIMATE);
}
