//! The widget's stylesheet as shipped: its comments and layout whitespace taken out (about a
//! quarter of its bytes, 1.7 kB of the first load brotli'd). Only what cannot change a rule's
//! meaning goes: comments, runs of whitespace (one space kept, so descendant selectors and
//! `calc(a - b)` stay), the spaces around `{`, `}`, `;` and `,`, and a `;` before `}`. The file
//! has no strings that hold those characters (a test keeps it so). A full minifier
//! (lightningcss) would add a hundred crates to the build every xtask command waits for.

/// `css` without comments and layout whitespace.
pub fn minify(css: &str) -> String {
    let out = strip_comments(css);
    let mut tight = String::with_capacity(out.len());
    let mut space = false;
    for c in out.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        let joins = matches!(c, '{' | '}' | ';' | ',');
        let last_joins = matches!(tight.chars().last(), Some('{' | '}' | ';' | ',') | None);
        if space && !joins && !last_joins {
            tight.push(' ');
        }
        space = false;
        if c == '}' && tight.ends_with(';') {
            tight.pop();
        }
        tight.push(c);
    }
    tight
}

/// `css` with each comment replaced by a space.
fn strip_comments(css: &str) -> String {
    let mut out = String::with_capacity(css.len());
    let mut rest = css;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        rest = match rest[start + 2..].find("*/") {
            Some(end) => &rest[start + 2 + end + 2..],
            None => "",
        };
        out.push(' ');
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_layout_whitespace_go_and_meaning_stays() {
        let css = "/* a */\n.a .b:hover , .c > .d {\n  width: calc(100% - 2px);\n  color: red;\n}\n\n@media (max-width: 600px) { .e { gap: 2px 4px; } }\n";
        assert_eq!(
            minify(css),
            ".a .b:hover,.c > .d{width: calc(100% - 2px);color: red}@media (max-width: 600px){.e{gap: 2px 4px}}"
        );
    }

    #[test]
    fn the_widgets_stylesheets_have_no_strings_the_minifier_could_change() {
        for name in ["glassbox.css", "glassbox-panels.css"] {
            let path = crate::tools::root().join("style").join(name);
            let css = strip_comments(&std::fs::read_to_string(path).unwrap());
            check_strings(&css);
        }
    }

    fn check_strings(css: &str) {
        for quoted in css.split('"').skip(1).step_by(2) {
            assert!(
                !quoted.contains(['{', '}', ';', ','])
                    && !quoted.contains("/*")
                    && !quoted.contains("  "),
                "a string the minifier would change: {quoted:?}"
            );
        }
        assert!(!css.contains('\''), "single-quoted strings are not checked");
    }
}
