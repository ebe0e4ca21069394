//! The verdicts a [`Policy`](super::Policy) has given lately, so that a command an
//! agent runs again (`cargo test`, `git status`) is not parsed again: parsing even
//! `true` costs more than the rest of the daemon's work before the spawn.
//!
//! A verdict is a pure function of the policy (its rules and home, fixed once it is
//! made), the command and the workdir: the check reads no file, no clock but its
//! parse deadline, and nothing of the environment after the policy is made. So the
//! cache lives in the policy and is keyed on the other two: a reloaded config makes a
//! new policy, with an empty cache, and a cloned one starts empty too. The verdicts
//! that may not be such a function are never kept: `parse-timeout` depends on how
//! busy the machine was, and `unparsable` is tree-sitter giving up, which it might
//! not do again.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Denial;

/// Commands longer than this are checked every time: they are rarely run twice, and
/// a bound on the key bounds the memory the cache holds.
const REMEMBERED_COMMAND_BYTES: usize = 4096;
/// Verdicts kept at most; one more pushes out an arbitrary one. With the bound on
/// commands (and workdirs, which are paths), at most a few MiB.
const REMEMBERED_VERDICTS: usize = 256;
/// Workdirs, like commands, are bounded, so that a long one does not pin memory.
const REMEMBERED_WORKDIR_BYTES: usize = 4096;

type Key = (Option<String>, String);
pub type Verdict = Result<(), Denial>;

/// A bounded map from (workdir, command) to verdict. A std mutex, held only for a
/// lookup or an insert and never across a check or an `.await`: request tasks on
/// every worker share the policy in force.
#[derive(Debug, Default)]
pub struct Verdicts(Mutex<HashMap<Key, Verdict>>);

impl Clone for Verdicts {
    /// Empty: a clone may be changed (`Policy::with_home`) before it is used.
    fn clone(&self) -> Verdicts {
        Verdicts::default()
    }
}

impl Verdicts {
    /// The verdict on `command` in `workdir`, from the cache or from `check`, which
    /// is called without the lock held.
    pub fn get_or_check(
        &self,
        command: String,
        workdir: Option<String>,
        check: impl FnOnce(&str, Option<&str>) -> Verdict,
    ) -> Verdict {
        let cacheable = command.len() <= REMEMBERED_COMMAND_BYTES
            && workdir
                .as_ref()
                .is_none_or(|w| w.len() <= REMEMBERED_WORKDIR_BYTES);
        if !cacheable {
            return check(&command, workdir.as_deref());
        }
        let key = (workdir, command);
        if let Some(verdict) = self.lock().get(&key) {
            return verdict.clone();
        }
        let verdict = check(&key.1, key.0.as_deref());
        if keeps(&verdict) {
            let mut verdicts = self.lock();
            if verdicts.len() >= REMEMBERED_VERDICTS
                && let Some(old) = verdicts.keys().next().cloned()
            {
                verdicts.remove(&old);
            }
            verdicts.insert(key, verdict.clone());
        }
        verdict
    }

    /// How many verdicts are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Verdict>> {
        // A panic while the lock was held left the map whole: inserts and removes
        // of a HashMap do not unwind halfway.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whether a verdict is the same whenever the check is made again.
fn keeps(verdict: &Verdict) -> bool {
    !matches!(verdict, Err(denial) if denial.rule == "parse-timeout" || denial.rule == "unparsable")
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::super::{CustomRule, Policy};
    use super::*;

    const HOME: &str = "/home/agent";

    #[test]
    fn a_command_asked_again_is_not_checked_again() {
        let verdicts = Verdicts::default();
        let checks = Cell::new(0);
        let check = |_: &str, _: Option<&str>| {
            checks.set(checks.get() + 1);
            Ok(())
        };
        for _ in 0..3 {
            let verdict = verdicts.get_or_check("true".into(), Some("/w".into()), check);
            assert_eq!(verdict, Ok(()));
        }
        assert_eq!((checks.get(), verdicts.len()), (1, 1));
    }

    /// The same command is denied in one workdir and allowed in another: each is
    /// given its own, whichever was asked first.
    #[test]
    fn a_verdict_in_one_workdir_is_never_served_in_another() {
        let command = "rm -rf /home/agent/project";
        for order in [
            ["/home/agent/project", "/tmp/elsewhere"],
            ["/tmp/elsewhere", "/home/agent/project"],
        ] {
            let policy = Policy::default().with_home(Some(HOME));
            for _ in 0..2 {
                for workdir in order {
                    let got = policy.verdict(command.into(), Some(workdir.into()));
                    // The positive control: the policy itself tells the two apart.
                    assert_eq!(got, policy.check_in(command, Some(workdir)), "{workdir}");
                    assert_eq!(got.is_err(), workdir == "/home/agent/project", "{workdir}");
                }
            }
            assert_eq!(
                policy.check(command).is_ok(),
                policy.verdict(command.into(), None).is_ok()
            );
        }
    }

    /// A reloaded config is a new policy: its verdicts are its own, and so are those of
    /// a policy with another home.
    #[test]
    fn another_policy_or_home_starts_with_no_verdicts() {
        let old = Policy::default().with_home(Some(HOME));
        assert!(old.verdict("npm publish".into(), None).is_ok());
        let rule = CustomRule {
            id: "no-publish".into(),
            command: "npm".into(),
            args: vec!["publish".into()],
            message: "CI releases".into(),
        };
        let new = Policy::new(Vec::new(), vec![rule]).with_home(Some(HOME));
        assert_eq!(
            new.verdict("npm publish".into(), None).unwrap_err().rule,
            "no-publish"
        );
        assert!(old.verdict("npm publish".into(), None).is_ok());

        let command = "rm -rf /work/one";
        let here = Policy::default().with_home(Some("/work/one"));
        assert!(here.verdict(command.into(), None).is_err());
        let there = here.clone().with_home(Some("/work/two"));
        assert_eq!(there.verdicts.len(), 0);
        assert!(there.verdict(command.into(), None).is_ok());
    }

    #[test]
    fn the_cache_is_bounded_and_long_keys_are_not_kept() {
        let verdicts = Verdicts::default();
        for n in 0..REMEMBERED_VERDICTS + 50 {
            let _ = verdicts.get_or_check(format!("echo {n}"), None, |_, _| Ok(()));
        }
        assert_eq!(verdicts.len(), REMEMBERED_VERDICTS);
        let long = "x".repeat(REMEMBERED_COMMAND_BYTES + 1);
        let verdicts = Verdicts::default();
        let _ = verdicts.get_or_check(long, None, |_, _| Ok(()));
        let _ = verdicts.get_or_check(
            "true".into(),
            Some("/".repeat(REMEMBERED_WORKDIR_BYTES + 1)),
            |_, _| Ok(()),
        );
        assert_eq!(verdicts.len(), 0);
    }

    #[test]
    fn verdicts_that_may_differ_next_time_are_not_kept() {
        let verdicts = Verdicts::default();
        for rule in ["parse-timeout", "unparsable"] {
            let denied = || Err(Denial::new(rule, "try again"));
            assert!(
                verdicts
                    .get_or_check("true".into(), None, |_, _| denied())
                    .is_err()
            );
            assert_eq!(verdicts.len(), 0, "{rule}");
        }
        let denied = || Err(Denial::new("rm-dangerous", "no"));
        assert!(
            verdicts
                .get_or_check("true".into(), None, |_, _| denied())
                .is_err()
        );
        assert_eq!(verdicts.len(), 1);
    }
}
