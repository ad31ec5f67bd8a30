//! Every string the widget shows, in one table ([`Word`] → English), the second language loaded as
//! a chunk when the element's `lang` (else the page's) asks for it, and the host's own words over
//! both (the element's `strings` property). docs/strings.md lists the keys.
//!
//! Components read a string through [`Words`]: `words.text(Word::Send)` is a signal the view
//! shows (it follows a change of language or of the host's words without a remount);
//! `words.get(…)` / `words.fill(…)` read it inside a closure. A string with `{name}` slots is
//! filled by name, so a translation may put them in its own order.

mod french;
mod overrides;
mod table;

use std::sync::Arc;

use leptos::prelude::*;

pub use table::Word;
use table::{FIRST, FIRST_COUNT};

/// The languages the widget speaks besides the host's own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    English,
    French,
}

impl Language {
    /// The language a BCP 47 tag (`fr`, `fr-CA`, `en-GB`, …) asks for; English for any other.
    pub fn of_tag(tag: &str) -> Self {
        let tag = tag.trim().as_bytes();
        let french = tag.len() >= 2
            && tag[..2].eq_ignore_ascii_case(b"fr")
            && matches!(tag.get(2), None | Some(b'-' | b'_'));
        if french { Self::French } else { Self::English }
    }
}

/// What the table answers now: the language's strings (none: English), the panels' English once
/// fetched, and the host's words.
#[derive(Default)]
struct Table {
    language: Option<Arc<[&'static str]>>,
    panels: Option<Arc<[&'static str]>>,
    overrides: Vec<(Word, Arc<str>)>,
    /// The language last asked for, so a chunk that arrives late does not undo a later choice.
    wanted: Option<Language>,
    /// How many times the host's words were given, so late ones do not undo later ones.
    overrides_asked: u32,
}

impl Table {
    fn word(&self, word: Word) -> &str {
        if let Some((_, own)) = self.overrides.iter().find(|(w, _)| *w == word) {
            return own;
        }
        let i = word as usize;
        if let Some(own) = self.language.as_ref().and_then(|strings| strings.get(i)) {
            return own;
        }
        if i < FIRST_COUNT {
            return FIRST[i];
        }
        // A panel's word before its English came: the panel waits for it ([`Words::panels`]).
        self.panels
            .as_ref()
            .and_then(|p| p.get(i - FIRST_COUNT).copied())
            .unwrap_or_default()
    }
}

/// One chat's strings: a handle (copied freely) on its table. The table is read and changed
/// through one function each, and its readers are never inlined: called from some hundred
/// places, a copy each would weigh on the first download.
#[derive(Clone, Copy)]
pub struct Words {
    table: RwSignal<Table>,
    /// Chunks the new chat waits for (the French strings, the key names): it is hidden
    /// meanwhile rather than shown in English for a moment — at most [`START_WAIT_MS`], and only
    /// as it starts (a later change applies in place).
    loading: RwSignal<u32>,
    /// Whether the chat has been shown: from then on nothing hides it.
    shown: StoredValue<bool>,
}

/// The longest a new chat stays hidden waiting for its words: then it shows the table's English.
const START_WAIT_MS: u64 = 1500;

impl Words {
    /// English, no host words.
    pub fn english() -> Self {
        Self {
            table: RwSignal::new(Table::default()),
            loading: RwSignal::new(0),
            shown: StoredValue::new(false),
        }
    }

    /// Ends the start: the chat shows now if its words have come, else once they do or at
    /// the latest after [`START_WAIT_MS`].
    pub fn started(self) {
        if self.loading.get_untracked() == 0 {
            self.shown.set_value(true);
            return;
        }
        set_timeout(
            move || {
                self.shown.try_set_value(true);
                self.loading.try_set(0);
            },
            std::time::Duration::from_millis(START_WAIT_MS),
        );
    }

    /// English with the panels' part at once, for code that shows panel words outside a panel
    /// (tests).
    pub fn english_in_full() -> Self {
        let words = Self::english();
        words.change(&mut |t| t.panels = Some(table::PANELS.to_vec().into()));
        words
    }

    /// Reads the table, tracked or not.
    #[inline(never)]
    fn read(self, tracked: bool, f: &mut dyn FnMut(&Table)) {
        // A chat gone (its table disposed) reads as empty.
        if tracked {
            self.table.try_with(|t| f(t));
        } else {
            self.table.try_with_untracked(|t| f(t));
        }
    }

    /// Changes the table and tells its readers (nothing once the chat is gone).
    #[inline(never)]
    fn change(self, f: &mut dyn FnMut(&mut Table)) {
        self.table.try_update(|t| f(t));
    }

    /// Whether no strings are on their way (tracked).
    pub fn settled(self) -> bool {
        self.loading.get() == 0
    }

    /// Fetches the panels' English if it has not come yet and no language covers it (a panel
    /// shows once it has).
    pub async fn panels(self) -> Result<(), crate::chunks::ChunkLoadError> {
        let mut has = false;
        self.read(false, &mut |t| {
            has = t.panels.is_some() || t.language.is_some()
        });
        if !has {
            let english = table::panels_english().await?;
            self.change(&mut |t| t.panels = Some(english.clone()));
        }
        Ok(())
    }

    /// Runs `load`; a chat that has not been shown yet waits for it.
    fn while_loading(self, load: impl Future<Output = ()> + 'static) {
        let counted = !self.shown.get_value();
        if counted {
            self.count_loading(1);
        }
        leptos::task::spawn_local(async move {
            load.await;
            if counted {
                self.count_loading(-1);
            }
        });
    }

    fn count_loading(self, by: i32) {
        self.loading
            .try_update(|n| *n = n.saturating_add_signed(by));
        if self.loading.try_get_untracked() == Some(0) {
            self.shown.try_set_value(true);
        }
    }

    /// The string now (tracked: a closure reading it runs again when it changes).
    #[inline(never)]
    pub fn get(self, word: Word) -> String {
        self.fill(word, &[])
    }

    /// The string as a signal a view shows.
    #[inline(never)]
    pub fn text(self, word: Word) -> Signal<String> {
        self.fill_text(word, Vec::new())
    }

    /// The string with its `{name}` slots filled (tracked).
    #[inline(never)]
    pub fn fill(self, word: Word, slots: &[(&str, &str)]) -> String {
        let mut out = String::new();
        self.read(true, &mut |t| out = fill(t.word(word), slots));
        out
    }

    /// [`Self::fill`] as a signal a view shows.
    #[inline(never)]
    pub fn fill_text(self, word: Word, slots: Vec<(&'static str, String)>) -> Signal<String> {
        Signal::derive(move || {
            let slots: Vec<(&str, &str)> = slots.iter().map(|(k, v)| (*k, v.as_str())).collect();
            self.fill(word, &slots)
        })
    }

    /// Switches to the language `tag` asks for (`None`: English); French arrives as a chunk,
    /// English meanwhile.
    pub fn set_language(self, tag: Option<&str>) {
        let language = tag.map_or(Language::English, Language::of_tag);
        let mut same = false;
        self.read(false, &mut |t| {
            same = t.wanted.unwrap_or(Language::English) == language
                && t.language.is_some() == (language == Language::French);
        });
        if same {
            return;
        }
        self.change(&mut |t| {
            t.wanted = Some(language);
            if language == Language::English {
                t.language = None;
            }
        });
        if language == Language::English {
            // A panel open in French now needs the panels' English.
            leptos::task::spawn_local(async move {
                let _ = self.panels().await;
            });
        } else {
            self.while_loading(async move {
                match french::strings().await {
                    Ok(strings) => self.change(&mut |t| {
                        if t.wanted == Some(Language::French) {
                            t.language = Some(strings.clone());
                        }
                    }),
                    Err(e) => web_sys::console::warn_1(
                        &format!("glassbox: the French strings: {e}; English meanwhile").into(),
                    ),
                }
            });
        }
    }

    /// Puts the host's words (key → string) over the table; an empty list clears them. Unknown
    /// keys are named in a console warning and left out.
    pub fn set_overrides(self, words: Vec<(String, String)>) {
        let mut asked = 0;
        self.change(&mut |t| {
            t.overrides_asked += 1;
            asked = t.overrides_asked;
            if words.is_empty() {
                t.overrides.clear();
            }
        });
        if words.is_empty() {
            return;
        }
        self.while_loading(async move {
            match overrides::parse(words).await {
                Ok((known, unknown)) => {
                    if !unknown.is_empty() {
                        web_sys::console::warn_1(
                            &format!(
                                "glassbox strings: no such key {}; docs/strings.md lists them",
                                unknown.join(", ")
                            )
                            .into(),
                        );
                    }
                    self.change(&mut |t| {
                        if t.overrides_asked == asked {
                            t.overrides = known.clone();
                        }
                    });
                }
                Err(e) => web_sys::console::warn_1(
                    &format!("glassbox strings: {e}; the table's words meanwhile").into(),
                ),
            }
        });
    }
}

/// Why a message cannot be sent (it needs more of the window than there is), in the chat's words.
pub fn overflow(w: Words, o: glassbox_core::context::receipt::Overflow) -> String {
    w.fill(
        Word::Overflow,
        &[
            ("needed", &o.needed.to_string()),
            ("room", &o.room.to_string()),
        ],
    )
}

/// The chat's strings from its context (English when the view was mounted without one, as a
/// component test does).
#[inline(never)]
pub fn words() -> Words {
    use_context::<Words>().unwrap_or_else(Words::english)
}

/// `template` with each `{name}` replaced by its value; a slot with no value stays as written.
pub fn fill(template: &str, slots: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}').map(|close| (&after[..close], close)) {
            Some((name, close)) if slots.iter().any(|(k, _)| *k == name) => {
                let value = slots
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map_or("", |(_, v)| *v);
                out.push_str(value);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `{name}` slots of a template, in order.
pub fn slots(template: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_filled_by_name_in_any_order() {
        assert_eq!(fill("{b} then {a}", &[("a", "1"), ("b", "2")]), "2 then 1");
        assert_eq!(fill("{missing} {a}", &[("a", "x")]), "{missing} x");
        assert_eq!(fill("no slot {", &[]), "no slot {");
        assert_eq!(slots("{n} of {total}"), vec!["n", "total"]);
    }

    #[test]
    fn tags_choose_the_language() {
        assert_eq!(Language::of_tag("fr"), Language::French);
        assert_eq!(Language::of_tag("FR-ca"), Language::French);
        assert_eq!(Language::of_tag("fr_BE"), Language::French);
        assert_eq!(Language::of_tag("en-GB"), Language::English);
        assert_eq!(Language::of_tag("fro"), Language::English);
        assert_eq!(Language::of_tag(""), Language::English);
    }

    #[test]
    fn the_host_s_words_come_first_then_the_language_then_english() {
        let mut t = Table::default();
        assert_eq!(t.word(Word::Send), "Send");
        t.language = Some(french::table().into());
        assert_eq!(t.word(Word::Add), "Ajouter");
        t.language = None;
        assert_eq!(
            t.word(Word::DrawerLabel),
            "",
            "a panel's English before it came"
        );
        t.panels = Some(table::PANELS.to_vec().into());
        assert_eq!(t.word(Word::DrawerLabel), table::english(Word::DrawerLabel));
        t.language = Some(french::table().into());
        assert_eq!(t.word(Word::Send), "Envoyer");
        t.overrides = vec![(Word::Send, "Go".into())];
        assert_eq!(t.word(Word::Send), "Go");
    }

    /// docs/strings.md, made from the table, the French and the launcher's words.
    fn strings_doc() -> String {
        use strum::VariantArray;
        let french = french::table();
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = String::from(DOC_HEAD);
        out.push_str("| Key | English | French |\n|---|---|---|\n");
        for word in Word::VARIANTS {
            let name: &'static str = word.into();
            let i = *word as usize;
            out.push_str(&format!(
                "| `{name}` | {} | {} |\n",
                cell(table::english(*word)),
                cell(french[i])
            ));
        }
        out.push_str(LAUNCHER_HEAD);
        out.push_str("| Key | English | French |\n|---|---|---|\n");
        let launcher = include_str!("../../../widget/js/launcher.js");
        let words_of = |language: &str| -> Vec<(String, String)> {
            let start = launcher
                .find(&format!("  {language}: {{\n"))
                .expect("launcher.js has its words per language");
            launcher[start..]
                .lines()
                .skip(1)
                .take_while(|l| !l.trim_start().starts_with('}'))
                .filter_map(|l| {
                    let (key, value) = l.trim().split_once(": ")?;
                    let value = value.trim_end_matches(',').trim_matches('\'');
                    Some((key.to_owned(), value.replace("\\'", "'")))
                })
                .collect()
        };
        for ((key, english), (_, french)) in words_of("en").into_iter().zip(words_of("fr")) {
            out.push_str(&format!(
                "| `{key}` | {} | {} |\n",
                cell(&english),
                cell(&french)
            ));
        }
        out
    }

    const DOC_HEAD: &str = "# The widget's words

Every string the widget shows is in one table: `app/src/words/table.rs` (English) and
`app/src/words/french.rs`, with the launcher's few (shown before the chat's code loads) in
`widget/js/launcher.js`. This page is made from them: a test fails when it differs
(`GLASSBOX_UPDATE_DOCS=1 cargo test -p glassbox-app words` writes it again).

- **Language**: the element's `lang` attribute, else the nearest ancestor's (across shadow
  roots; the page's `<html lang>`). A change of the element's `lang` or of `<html lang>` is
  followed in place. `fr`, `fr-CA`, … is French, anything else English. French is a chunk of its
  own, fetched when asked for; a chat starting in French (or with the host's words) stays hidden
  the moment it takes (at most 1.5 s, then English) rather than showing English first.
- **The host's words**: the element's `strings` property, key → string, over either language,
  applied in place (no reconnect, the draft kept); `null` or `{}` clears them. A key not below is
  named in a console warning. React: `<GlassboxChat strings={…} lang=\"fr\">`.

  ```js
  document.querySelector('glassbox-chat').strings = {
    send: 'Ask',
    write_a_message: 'Ask about your order…',
    launcher_open: 'Questions?',
  };
  ```
- `{name}` marks a slot filled when shown (a file's name, a count, …): keep the slots, in any order.
- The `placeholder` attribute and an agent's `placeholder` win over `write_a_message`.
- Not here: what the server writes (its error messages, such as `budget_exhausted`'s; the
  topics' labels), the words of the checks the browser and the server share (a refused file's
  reason, invalid settings), the model's replies, and
  `<glassbox-token-meter>` used alone (English). They are shown as written.

## The chat

";

    const LAUNCHER_HEAD: &str = "
## The launcher (`mode=\"launcher\"`)

";

    #[test]
    fn the_overflow_reads_as_the_server_says_it() {
        let o = glassbox_core::context::receipt::Overflow {
            needed: 9000,
            room: 8000,
        };
        assert_eq!(overflow(Words::english(), o), o.describe());
    }

    #[test]
    fn docs_list_every_string() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/strings.md");
        let want = strings_doc();
        if std::env::var_os("GLASSBOX_UPDATE_DOCS").is_some() {
            std::fs::write(path, &want).expect("docs/strings.md is writable");
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/strings.md differs from the table: GLASSBOX_UPDATE_DOCS=1 cargo test -p glassbox-app words"
        );
    }
}
