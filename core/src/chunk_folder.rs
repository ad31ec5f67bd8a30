//! The name of a build's folder of wasm chunks, `<module>_lazy-<8 hex>`: written by
//! `cargo xtask build` (named for the linked wasm, so what is in one never changes) and recognised
//! by the server (which caches such folders for good).

/// The folder of module `module`'s chunks built from a wasm whose digest starts with `digest`.
pub fn name(module: &str, digest: &[u8]) -> String {
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{module}_lazy-{hash}")
}

/// The module whose chunks folder `name` is, if it is one.
pub fn module_of(name: &str) -> Option<&str> {
    let (module, hash) = name.rsplit_once("_lazy-")?;
    (!module.is_empty() && hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_recognised_and_nothing_else() {
        let name = name("glassbox_widget", &[0x95, 0x70, 0xa3, 0xfe, 0x11]);
        assert_eq!(name, "glassbox_widget_lazy-9570a3fe");
        assert_eq!(module_of(&name), Some("glassbox_widget"));
        for not in [
            "glassbox_widget_lazy",
            "glassbox_widget_lazy-9570a3f",
            "glassbox_widget_lazy-notahash",
            "glassbox_widget_lazy_backup",
            "_lazy-9570a3fe",
            "load.js",
        ] {
            assert_eq!(module_of(not), None, "{not}");
        }
    }
}
