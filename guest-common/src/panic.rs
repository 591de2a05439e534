//! Panic payloads as text, for the places that catch or hook panics: the
//! selftests' runner and its child processes, and /init.

use std::any::Any;

/// What the panic said: `panic!` gives a `&str` or a `String`; any other
/// payload (`panic_any`) is only known to be there.
pub fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, panic_any};

    #[test]
    fn payloads() {
        let p = catch_unwind(|| panic!("boom {}", 1)).unwrap_err();
        assert_eq!(panic_text(&*p), "boom 1");
        let p = catch_unwind(|| panic!("static")).unwrap_err();
        assert_eq!(panic_text(&*p), "static");
        let p = catch_unwind(|| panic_any(7u8)).unwrap_err();
        assert_eq!(panic_text(&*p), "(non-string panic payload)");
    }
}
