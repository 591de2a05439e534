//! Where a harness self-test's `--inject` goes: `panic`, `warn`, `hang`
//! and `flood` to /init (around the program), `KIND:TEST` to the
//! selftests runner (in the middle of the plan).

use anyhow::{bail, Result};
use guest_common::protocol::{Inject, TestInject};

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct GuestInject {
    pub init: Option<Inject>,
    pub runner: Option<(TestInject, String)>,
}

impl GuestInject {
    /// The test a runner injection names must be one the run plans.
    pub fn check_against(&self, plan: &[String]) -> Result<()> {
        match &self.runner {
            Some((kind, test)) if !plan.contains(test) => bail!(
                "--inject {}:{test}: no such test in this run's plan",
                kind.name()
            ),
            _ => Ok(()),
        }
    }
}

pub(super) fn split(inject: Option<&str>) -> Result<GuestInject> {
    Ok(match inject {
        None => GuestInject::default(),
        Some(v) if v.contains(':') => GuestInject {
            init: None,
            runner: Some(TestInject::parse_spec(v).map_err(anyhow::Error::msg)?),
        },
        Some(v) => GuestInject {
            init: Some(Inject::parse(v).ok_or_else(|| {
                anyhow::anyhow!(
                    "--inject {v}: want panic, warn, hang, flood or crash|freeze|stall:TEST"
                )
            })?),
            runner: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injections_go_to_init_or_to_the_runner() {
        assert_eq!(split(None).unwrap(), GuestInject::default());
        assert_eq!(split(Some("panic")).unwrap().init, Some(Inject::Panic));
        let mid = split(Some("crash:t11_split_middle_page")).unwrap();
        assert_eq!(
            mid.runner,
            Some((TestInject::Crash, "t11_split_middle_page".into()))
        );
        assert_eq!(mid.init, None);
        assert!(mid.check_against(&["t11_split_middle_page".into()]).is_ok());
        let err = mid
            .check_against(&["t01_a".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such test"), "{err}");
        assert!(split(Some("boom")).is_err());
        assert!(split(Some("boom:t01_a")).is_err());
    }
}
