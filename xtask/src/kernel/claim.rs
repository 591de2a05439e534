//! `--claim`: the side of the test plan a kernel the plan does not know
//! is held to. `SIDE` holds every such kernel of the run (the source's
//! `base`, a branch's variants, a bzImage by path); `KERNEL=SIDE` holds
//! the one kernel so named (its name in the run, or a bzImage's path or
//! file name). Both may be given, comma-separated. The sides are
//! `guest_common::protocol::PLAN_KERNELS`.

use anyhow::{bail, Result};
use guest_common::protocol::PLAN_KERNELS;

/// `--claim`, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    /// `SIDE`: every kernel the plan does not know.
    pub any: Option<String>,
    /// `KERNEL=SIDE`, in the order given.
    pub named: Vec<(String, String)>,
}

impl Claims {
    /// Parses `--claim`'s value; the error names the word and what it
    /// takes.
    pub fn parse(text: Option<&str>) -> Result<Claims> {
        let mut claims = Claims::default();
        for word in text.into_iter().flat_map(|t| t.split(',')) {
            let (kernel, side) = match word.split_once('=') {
                Some((k, s)) => (Some(k), s),
                None => (None, word),
            };
            if !PLAN_KERNELS.contains(&side) {
                bail!(
                    "--claim {word}: {side:?} is no side of the plan; take one of {} (or KERNEL=SIDE)",
                    PLAN_KERNELS.join(", ")
                );
            }
            match kernel {
                Some("") => bail!("--claim {word}: no kernel before '='; write KERNEL=SIDE"),
                Some(k) if claims.named.iter().any(|(n, _)| n == k) => {
                    bail!("--claim {word}: {k} is claimed twice")
                }
                Some(k) => claims.named.push((k.to_string(), side.to_string())),
                None if claims.any.is_some() => {
                    bail!("--claim {word}: one SIDE for every kernel, the others as KERNEL=SIDE")
                }
                None => claims.any = Some(side.to_string()),
            }
        }
        Ok(claims)
    }

    /// The side `KERNEL=SIDE` gives the kernel called any of `names`.
    pub fn named(&self, names: &[&str]) -> Option<&str> {
        self.named
            .iter()
            .find(|(k, _)| names.contains(&k.as_str()))
            .map(|(_, s)| s.as_str())
    }

    /// The side of a kernel the plan does not know, called any of
    /// `names`: its own claim, else the claim for every such kernel.
    pub fn side_of(&self, names: &[&str]) -> Option<&str> {
        self.named(names).or(self.any.as_deref())
    }
}

/// clap's check of `--claim`.
pub fn parse_arg(text: &str) -> Result<String, String> {
    Claims::parse(Some(text))
        .map(|_| text.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_holds_every_unknown_kernel_or_one_by_name() {
        let c = Claims::parse(Some("mainline,lazy-flag=direct,./m.bzImage=eager")).unwrap();
        assert_eq!(c.any.as_deref(), Some("mainline"));
        assert_eq!(c.side_of(&["lazy-flag"]), Some("direct"));
        assert_eq!(c.side_of(&["m.bzImage", "./m.bzImage"]), Some("eager"));
        assert_eq!(c.side_of(&["base"]), Some("mainline"));
        assert_eq!(c.named(&["base"]), None);
        assert_eq!(Claims::parse(None).unwrap(), Claims::default());
        for (bad, says) in [
            ("patched", "\"patched\" is no side of the plan"),
            ("x=other", "\"other\" is no side"),
            ("=eager", "no kernel before '='"),
            ("a=eager,a=direct", "a is claimed twice"),
            ("eager,direct", "one SIDE for every kernel"),
        ] {
            let err = Claims::parse(Some(bad)).unwrap_err().to_string();
            assert!(err.starts_with("--claim "), "{err}");
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
