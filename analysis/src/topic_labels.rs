//! Whether a key phrase reads like a subject a person would name: a noun phrase ("Sourdough
//! bread", "Black holes", "Schwarze Löcher"), not a verb fragment ("Bread comes", "Holes form")
//! or a noun with its predicate ("Starter alive").
//!
//! A small chunking step for the six languages extraction knows: a phrase of one or two content
//! words is rejected when a word is a verb form or an adverb, when an adjective stands alone, or
//! when it ends where a noun phrase cannot end: on an adjective in English and German (their
//! adjectives come before the noun; French, Spanish, Portuguese and Italian put most after it), on
//! a lowercase word in German (German nouns are capitalized), on a past form in English ("-ed").
//! The verb forms are those of common verbs that are rarely a topic's noun; words that are as
//! often nouns ("form", "run", "test", "plan") are left to the other rules.

/// The language of a text, as far as the rules need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    English,
    French,
    German,
    Spanish,
    Portuguese,
    Italian,
}

/// Function words telling the languages apart (each common in its language, rare in the others).
const MARKERS: &[(Lang, &[&str])] = &[
    (
        Lang::English,
        &[
            "the", "and", "is", "are", "to", "of", "my", "it", "you", "what", "how", "with",
            "this", "do", "i",
        ],
    ),
    (
        Lang::French,
        &[
            "le", "les", "et", "est", "je", "vous", "pour", "dans", "pas", "mon", "une", "des",
            "du", "au", "avec", "c'est", "j'ai", "qu'il", "ce",
        ],
    ),
    (
        Lang::German,
        &[
            "der", "die", "das", "und", "ist", "nicht", "ich", "ein", "eine", "mit", "auf", "zu",
            "den", "dem", "mein", "meine", "wie", "sich", "es",
        ],
    ),
    (
        Lang::Spanish,
        &[
            "el", "los", "las", "y", "es", "en", "por", "para", "mi", "lo", "se", "del", "cómo",
            "qué", "está", "pero", "muy",
        ],
    ),
    (
        Lang::Portuguese,
        &[
            "o", "os", "as", "e", "é", "em", "não", "meu", "minha", "do", "da", "dos", "na", "no",
            "você", "uma", "com", "mas",
        ],
    ),
    (
        Lang::Italian,
        &[
            "il", "gli", "di", "e", "è", "che", "non", "mi", "mio", "della", "del", "sono", "ho",
            "per", "una", "con", "questo",
        ],
    ),
];

/// The language of a text by its function words; `None` when it has too few to tell.
pub fn language_of(text: &str) -> Option<Lang> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase().replace('’', "'"))
        .collect();
    let (lang, hits) = MARKERS
        .iter()
        .map(|(lang, markers)| {
            let hits = words
                .iter()
                .filter(|w| markers.contains(&w.as_str()))
                .count();
            (*lang, hits)
        })
        // The first of equals: English, then the order above.
        .fold((None, 0), |best, (lang, hits)| {
            if hits > best.1 {
                (Some(lang), hits)
            } else {
                best
            }
        });
    lang.filter(|_| hits >= 2)
}

/// For each word of a sentence (as written, stopwords included), whether it stands as a verb
/// there: a verb form or an adverb of the tables, a word right after a subject or clitic pronoun
/// ("I keep", "je garde", "se pone"; German, whose verb comes before its subject in questions,
/// is left to its capitalization), or (English) a bare word after a plural noun
/// ("black holes form", "my tomatoes split").
pub fn verbs_in(words: &[&str], lang: Option<Lang>) -> Vec<bool> {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let before_verbs = PRONOUNS
        .iter()
        .find(|(l, _)| Some(*l) == lang.or(Some(Lang::English)))
        .map_or(&[][..], |(_, p)| *p);
    (0..words.len())
        .map(|i| {
            let w = lower[i].as_str();
            is_verb(w, lang)
                || is_adverb(w, lang)
                || i.checked_sub(1).is_some_and(|p| {
                    before_verbs.contains(&lower[p].as_str())
                        || (matches!(lang, None | Some(Lang::English))
                            && subject_then_verb(words[p], words[i]))
                })
        })
        .collect()
}

/// Pronouns a verb follows: subjects, and the clitics that stand before the verb.
const PRONOUNS: &[(Lang, &[&str])] = &[
    (
        Lang::English,
        &[
            "i", "we", "they", "he", "she", "you", "it", "i'd", "i'll", "we'll", "you'll",
        ],
    ),
    (
        Lang::French,
        &[
            "je", "tu", "il", "elle", "on", "nous", "vous", "ils", "elles", "se", "me", "te", "ne",
        ],
    ),
    (Lang::Spanish, &["yo", "se", "me", "te", "nos", "no"]),
    (
        Lang::Portuguese,
        &[
            "eu", "ele", "ela", "eles", "elas", "você", "se", "me", "te", "não",
        ],
    ),
    (Lang::Italian, &["io", "mi", "ti", "si", "ci", "non"]),
];

/// English: a lowercase plural noun, then a bare lowercase word that is not a noun by its ending:
/// a subject and its verb ("holes form", "leaves turn"), not a compound ("sourdough bread").
fn subject_then_verb(first: &str, second: &str) -> bool {
    let plural = first.chars().count() >= 4
        && first.chars().all(char::is_lowercase)
        && first.ends_with('s')
        && !["ss", "us", "is", "ics", "'s"]
            .iter()
            .any(|e| first.ends_with(e))
        && !NOT_PLURALS.contains(&first);
    let bare = second.chars().count() >= 3
        && second.chars().all(char::is_lowercase)
        && !second.ends_with('s')
        && !NOUN_ENDINGS.iter().any(|e| second.ends_with(e));
    plural && bare
}

/// English words in "-s" that are not plural nouns.
const NOT_PLURALS: &[&str] = &[
    "this",
    "does",
    "has",
    "was",
    "its",
    "his",
    "hers",
    "ours",
    "yours",
    "theirs",
    "yes",
    "always",
    "perhaps",
    "sometimes",
    "afterwards",
    "towards",
    "besides",
    "whereas",
    "news",
    "series",
    "species",
    "gas",
    "bias",
    "lens",
    "canvas",
    "atlas",
    "christmas",
    "lots",
    "means",
];

/// English endings of nouns (and of the gerunds that name activities).
const NOUN_ENDINGS: &[&str] = &[
    "ing", "tion", "sion", "ment", "ness", "ity", "ance", "ence", "ship", "ism", "ist", "er", "or",
    "age", "ure", "ery", "ogy", "hood", "dom",
];

/// Whether `words` (one to three words as written, in a text of `lang` when known) can name a
/// topic: a noun phrase, not a verb fragment.
pub fn is_noun_phrase(words: &[&str], lang: Option<Lang>) -> bool {
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let Some(last) = lower.last() else {
        return false;
    };
    if verbs_in(words, lang).contains(&true) {
        return false;
    }
    let english_like = matches!(lang, None | Some(Lang::English));
    // An adjective alone names no subject; in English and German it cannot end a noun phrase.
    if ADJECTIVES.contains(&last.as_str())
        && (lower.len() == 1 || english_like || lang == Some(Lang::German))
    {
        return false;
    }
    // German capitalizes its nouns: a phrase ending on a lowercase word ends on a verb,
    // an adjective or an adverb.
    if lang == Some(Lang::German) && words.last().is_some_and(|w| !starts_uppercase(w)) {
        return false;
    }
    true
}

fn starts_uppercase(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
}

/// A verb form: one of the tables, or (English) a past form in "-ed".
fn is_verb(w: &str, lang: Option<Lang>) -> bool {
    if VERBS.iter().any(|forms| forms.split(' ').any(|f| f == w)) {
        return true;
    }
    match lang {
        None | Some(Lang::English) => {
            w.len() >= 5 && w.ends_with("ed") && !w.ends_with("eed") && !ED_NOUNS.contains(&w)
        }
        _ => false,
    }
}

/// An adverb: one of the table, or (English) a word in "-ly" that is not a noun.
fn is_adverb(w: &str, lang: Option<Lang>) -> bool {
    if ADVERBS.contains(&w) {
        return true;
    }
    match lang {
        None | Some(Lang::English) => {
            w.chars().count() >= 5 && w.ends_with("ly") && !LY_NOUNS.contains(&w)
        }
        _ => false,
    }
}

/// English words in "-ed" that are not past forms.
const ED_NOUNS: &[&str] = &[
    "hundred", "kindred", "embed", "infrared", "sacred", "naked", "wicked",
];

/// English words in "-ly" that are nouns (or name things well enough).
const LY_NOUNS: &[&str] = &[
    "family",
    "italy",
    "july",
    "supply",
    "reply",
    "assembly",
    "butterfly",
    "jelly",
    "belly",
    "rally",
    "anomaly",
    "monopoly",
    "lily",
    "bully",
    "firefly",
    "dragonfly",
    "melly",
    "shelly",
    "emily",
    "kelly",
    "sally",
    "polly",
    "daily",
    "weekly",
    "monthly",
    "quarterly",
    "ugly",
];

/// Forms of common verbs that rarely name a topic, one verb a line (inflected forms that are as
/// often nouns left out: "rise" stays, "rises" too — a person says "the rise").
const VERBS: &[&str] = &[
    // English
    "come comes came",
    "go goes went gone",
    "become becomes became",
    "seem seems seemed",
    "happen happens",
    "appear appears",
    "stay stays",
    "remain remains",
    "keeps kept",
    "puts",
    "gives gave given",
    "takes took taken",
    "bring brings brought",
    "gets got gotten",
    "tell tells told",
    "says said",
    "ask asks",
    "find finds found",
    "feel feels felt",
    "leave left",
    "believe believes",
    "hold holds held",
    "lose loses lost",
    "paid",
    "include includes",
    "continue continues",
    "learn learns learnt",
    "understand understands understood",
    "follow follows",
    "create creates",
    "speak speaks spoken",
    "allow allows",
    "add adds",
    "spend spends spent",
    "grow grows grew grown",
    "win wins won",
    "remember remembers",
    "consider considers",
    "buy buys bought",
    "wait waits",
    "send sends sent",
    "expect expects",
    "fell fallen",
    "reach reaches",
    "require requires",
    "decide decides",
    "broke broken",
    "explain explains",
    "carry carries carried",
    "sit sits",
    "suggest suggests",
    "avoid avoids",
    "prefer prefers",
    "ensure ensures",
    "choose chooses chose chosen",
    "mention mentions",
    "tend tends",
    "manage manages",
    "forget forgets forgot forgotten",
    "guess guesses",
    "recommend recommends",
    "wonder wonders",
    "enjoy enjoys",
    "fail fails",
    "affect affects",
    "apply applies",
    "prevent prevents",
    "provide provides",
    "reduce reduces",
    "improve improves",
    "describe describes",
    "involve involves",
    "depend depends",
    "belong belongs",
    "exist exists",
    "agree agrees",
    "suppose supposes",
    "realize realizes realise realises",
    "assume assumes",
    "imagine imagines",
    "think thinks thought",
    "know knows knew known",
    "see sees saw seen",
    "seeing",
    "write writes wrote written",
    "begin begins began begun",
    "eat eats ate eaten",
    "die dies",
    "get gets",
    "goes",
    "sounds",
    "tries",
    "wants",
    "likes",
    "lets",
    "happens",
    "means meant",
    "does did done",
    "has had",
    "is was were been am",
    "can could should would will shall must might may",
    "don't doesn't didn't can't won't isn't aren't wasn't weren't shouldn't wouldn't couldn't",
    // French
    "vient viennent venir devient deviennent devenir semble semblent sembler",
    "restent rester gardent garder mettent mettre",
    "prend prends prennent prendre donne donnent donner trouve trouvent trouver",
    "arrive arrivent arriver passe passent passer veux veut voulez voudrais vouloir",
    "peux peut pouvez peuvent pouvoir dois doit devez devrais devrait devoir",
    "sais sait savez savoir crois croit croire pense penses pensez penser",
    "aime aimes aimez aimer cherche cherches chercher essaie essaye essayer",
    "commence commencer utilise utilisez utiliser ajoute ajoutez ajouter",
    "sors sortent sortir lève lèvent lever gonfle gonflent gonfler",
    "tient tiennent tenir mange manges manger vais va vont aller",
    "fais font faire dit dis dire vois voit voir",
    "suis es sommes êtes sont était étais être ai as avons avez ont avoir",
    // German
    "kommt kommen kam wird werden wurde wurden bleibt bleiben blieb",
    "geht gehen ging gehe steht stehen liegt liegen",
    "macht machen mache machte nimmt nehmen nahm gibt geben gab",
    "hält halten hielt findet finden fand denke denkt denken dachte",
    "weiß wissen wusste sagt sagen sagte fragt fragen",
    "möchte möchten will willst wollen darf dürfen soll sollen sollte muss müssen",
    "kann kannst können könnte brauche brauchst braucht brauchen",
    "funktioniert funktionieren klappt klappen hilft helfen lohnt",
    "bist ist sind waren habe hast haben hatte",
    // Spanish
    "viene vienen venir parece parecen parecer queda quedan quedar",
    "pongo pone ponen poner tomo toma toman tomar doy da dan dar",
    "encuentro encuentra encontrar pasa pasan pasar quiero quiere quieren querer",
    "puedo puede pueden poder debo debe deben debería deber sé sabe saber",
    "creo cree creer pienso piensa pensar necesito necesita necesitar",
    "empiezo empieza empezar usar hago hace hacen hacer digo decir",
    "voy va van ir veo ve ver tengo tiene tienen tener estoy está están estar",
    "soy eres somos fue ser han haber",
    "salen salir sube suben subir",
    // Portuguese
    "vem vêm vir parece parecem ficar fica ficam ponho põe pôr",
    "tomo toma tomar dou dá dar encontro encontra encontrar passa passar",
    "quero quer querem querer posso pode podem poder devo deve devem devia dever",
    "sei sabe saber acho acha achar penso pensa pensar preciso precisa precisar",
    "começo começa começar usar faço faz fazem fazer digo diz dizer",
    "vou vai vão ir vejo vê ver tenho tem têm ter estou está estão estar",
    "sou somos são foi ser",
    // Italian
    "viene vengono venire sembra sembrano sembrare resta restano restare",
    "metto mette mettere prendo prende prendere do dà dare trovo trova trovare",
    "passa passare voglio vuole vogliono volere posso può possono potere",
    "devo deve devono dovrei dovere so sa sapere credo crede credere",
    "penso pensa pensare usare faccio fanno fare",
    "dico dice dire vado va vanno andare vedo vede vedere tengo tiene tenere",
    "sono siamo siete essere hai hanno avere",
];

/// Adjectives that describe a thing rather than name it: alone they name no subject, and in
/// English and German they cannot end a noun phrase ("Starter alive", "Bread dense").
const ADJECTIVES: &[&str] = &[
    // English
    "alive",
    "asleep",
    "awake",
    "afraid",
    "aware",
    "alone",
    "ready",
    "able",
    "unable",
    "sure",
    "dense",
    "flat",
    "hard",
    "soft",
    "hot",
    "warm",
    "wet",
    "dry",
    "thick",
    "thin",
    "heavy",
    "bright",
    "fast",
    "slow",
    "quick",
    "easy",
    "difficult",
    "simple",
    "safe",
    "possible",
    "impossible",
    "available",
    "necessary",
    "important",
    "normal",
    "common",
    "correct",
    "wrong",
    "empty",
    "full",
    "cheap",
    "expensive",
    "healthy",
    "sick",
    "tired",
    "ok",
    "fine",
    "bad",
    "worse",
    "worst",
    "happy",
    "sad",
    "clear",
    "loud",
    "quiet",
    "strong",
    "weak",
    "tight",
    "loose",
    "fresh",
    "stale",
    "raw",
    "ripe",
    "deep",
    "shallow",
    "wide",
    "narrow",
    "large",
    "huge",
    "tiny",
    "young",
    "late",
    "early",
    "real",
    "true",
    "false",
    "whole",
    "certain",
    "likely",
    "unlikely",
    "similar",
    "stuck",
    "worried",
    "confused",
    "excited",
    "interested",
    "curious",
    "nervous",
    "anxious",
    "annoying",
    "frustrating",
    "weird",
    "strange",
    "odd",
    "random",
    "overwhelmed",
    "fair",
    "ideal",
    "enough",
    "okay",
    "reasonable",
    "useful",
    "helpful",
    "specific",
    "particular",
    "proper",
    "basic",
    "black",
    "white",
    "red",
    "green",
    "blue",
    "yellow",
    "brown",
    "grey",
    "gray",
    "sour",
    "sweet",
    "bitter",
    "salty",
    // French
    "vivant",
    "vivante",
    "mort",
    "morte",
    "dense",
    "plat",
    "facile",
    "difficile",
    "possible",
    "nécessaire",
    "important",
    "importante",
    "normal",
    "normale",
    "bon",
    "bonne",
    "mauvais",
    "mauvaise",
    "prêt",
    "prête",
    "sûr",
    "sûre",
    // German
    "lebendig",
    "tot",
    "flach",
    "dicht",
    "einfach",
    "schwierig",
    "möglich",
    "nötig",
    "wichtig",
    "normal",
    "richtig",
    "falsch",
    "warm",
    "kalt",
    "fertig",
    "sicher",
    "besser",
    // Spanish, Portuguese, Italian
    "vivo",
    "viva",
    "muerto",
    "muerta",
    "morto",
    "morta",
    "fácil",
    "difícil",
    "facile",
    "difficile",
    "posible",
    "possível",
    "possibile",
    "necesario",
    "necessário",
    "necessario",
    "importante",
    "bueno",
    "buena",
    "bom",
    "boa",
    "buono",
    "buona",
    "pronto",
    "pronta",
    "seguro",
    "segura",
    "sicuro",
    "sicura",
];

/// Adverbs of the six languages that the stopwords leave in.
const ADVERBS: &[&str] = &[
    "instead",
    "anyway",
    "together",
    "apart",
    "ahead",
    "later",
    "soon",
    "somehow",
    "otherwise",
    "tomorrow",
    "today",
    "tonight",
    "yesterday",
    "recently",
    "anymore",
    "everywhere",
    "inside",
    "outside",
    "upstairs",
    "downstairs",
    "overnight",
    "alright",
    "ensuite",
    "déjà",
    "vite",
    "ici",
    "maintenant",
    "demain",
    "hier",
    "aujourd'hui",
    "ainsi",
    "plutôt",
    "vraiment",
    "seulement",
    "surtout",
    "dedans",
    "dehors",
    "oben",
    "unten",
    "richtig",
    "wirklich",
    "eigentlich",
    "vielleicht",
    "heute",
    "morgen",
    "gestern",
    "später",
    "bald",
    "hier",
    "dort",
    "trotzdem",
    "sofort",
    "natürlich",
    "genau",
    "ahora",
    "luego",
    "después",
    "antes",
    "todavía",
    "aquí",
    "allí",
    "mañana",
    "hoy",
    "ayer",
    "agora",
    "depois",
    "antes",
    "ainda",
    "aqui",
    "ali",
    "amanhã",
    "hoje",
    "ontem",
    "adesso",
    "dopo",
    "prima",
    "ancora",
    "qui",
    "lì",
    "domani",
    "oggi",
    "ieri",
    "davvero",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn np(phrase: &str, lang: Option<Lang>) -> bool {
        let words: Vec<&str> = phrase.split(' ').collect();
        is_noun_phrase(&words, lang)
    }

    #[test]
    fn the_language_of_a_text_is_told_by_its_function_words() {
        let en = "My sourdough bread comes out dense and flat. What is wrong with it?";
        assert_eq!(language_of(en), Some(Lang::English));
        let fr = "Mon pain au levain est plat et dense, je ne sais pas pourquoi.";
        assert_eq!(language_of(fr), Some(Lang::French));
        let de = "Meine Heizkörper gluckern und werden oben nicht richtig warm.";
        assert_eq!(language_of(de), Some(Lang::German));
        let es = "¿Cuál es la diferencia entre un canal con buffer y uno sin buffer en Go?";
        assert_eq!(language_of(es), Some(Lang::Spanish));
        assert_eq!(language_of("ok thanks"), None);
    }

    #[test]
    fn a_word_after_a_subject_pronoun_is_a_verb() {
        let words = ["How", "do", "I", "feed", "my", "starter"];
        assert_eq!(
            verbs_in(&words, Some(Lang::English)),
            [false, true, false, true, false, false]
        );
        let words = ["Je", "nourris", "mon", "levain"];
        assert_eq!(
            verbs_in(&words, Some(Lang::French)),
            [false, true, false, false]
        );
        let words = ["La", "masa", "se", "pone", "dura"];
        assert_eq!(
            verbs_in(&words, Some(Lang::Spanish)),
            [false, false, false, true, false]
        );
    }

    #[test]
    fn english_verb_fragments_are_rejected_and_noun_phrases_kept() {
        let en = Some(Lang::English);
        for bad in [
            "Bread comes",
            "Starter alive",
            "Pods crashed",
            "holes form",
            "Rise quickly",
            "Alive",
            "Comes",
        ] {
            assert!(!np(bad, en), "{bad}");
        }
        for good in [
            "Sourdough bread",
            "Black holes",
            "Starter",
            "Marathon training",
            "Used car",
            "Kubernetes pod",
        ] {
            assert!(np(good, en), "{good}");
        }
    }

    #[test]
    fn french_verb_fragments_are_rejected_and_noun_phrases_kept() {
        let fr = Some(Lang::French);
        for bad in [
            "Pain devient",
            "Levain gonfle",
            "Pâte lève",
            "Mettre",
            "Plat",
        ] {
            assert!(!np(bad, fr), "{bad}");
        }
        // French adjectives follow the noun.
        for good in [
            "Pain plat",
            "Levain",
            "Trous noirs",
            "Impôts",
            "Pâte feuilletée",
        ] {
            assert!(np(good, fr), "{good}");
        }
    }

    #[test]
    fn german_phrases_end_on_a_capitalized_noun() {
        let de = Some(Lang::German);
        for bad in [
            "Heizkörper gluckern",
            "Teig bleibt",
            "Sauerteig lebendig",
            "Heizkörper richtig",
        ] {
            assert!(!np(bad, de), "{bad}");
        }
        for good in [
            "Schwarze Löcher",
            "Heizkörper",
            "Sauerteig Brot",
            "Welpenerziehung",
        ] {
            assert!(np(good, de), "{good}");
        }
    }
}
