//! Who a request acts for (`Request::callers`): every request of the protocol, built
//! once here, against the one list in `message.rs`.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::*;
use crate::exec::{PtySize, StreamName};
use crate::requests::{FollowFrom, PolicyCheck, WaitConditions};
use crate::top::{TopRequest, WatchRequest};

/// Requests that carry a caller but act for none, on purpose: `bashc top` names a
/// session of its own only to be told apart, and looks at every session.
const CARRY_A_CALLER_BUT_ACT_FOR_NONE: &[&str] = &["Top", "Watch"];

/// One request of every kind the protocol has, each naming an owner wherever it
/// names one.
fn every_request() -> Vec<Request> {
    let caller = |session: &str| Caller {
        session: session.to_owned(),
        owner: Some(Owner {
            pid: 1,
            start_time: None,
        }),
    };
    let job = || JobRef::Id("j1".to_owned());
    let wait = |session: &str| WaitRequest {
        caller: caller(session),
        job: job(),
        timeout_ms: None,
        conditions: WaitConditions::default(),
        any_session: false,
        mcp_call: false,
    };
    let job_request = || JobRequest {
        caller: caller("s"),
        job: job(),
        any_session: false,
    };
    let mut exec = ExecParams::new("true", "s", "/");
    exec.owner = caller("s").owner;
    vec![
        Request::Exec(exec),
        Request::Output(OutputRequest {
            job: job(),
            stream: StreamName::Stdout,
            offset: 1,
            limit: None,
            caller: caller("s"),
            any_session: false,
            max_bytes: None,
            from_end: false,
        }),
        Request::CheckPolicy(PolicyCheck {
            command: "true".to_owned(),
            workdir: Some("/tmp".to_owned()),
        }),
        Request::Status,
        Request::Jobs(JobsRequest {
            caller: caller("s"),
            session: Some("other".to_owned()),
        }),
        Request::Check(job_request()),
        Request::Wait(wait("s")),
        Request::Kill(KillRequest {
            caller: caller("s"),
            job: job(),
            signal: None,
            grace_ms: None,
            any_session: false,
        }),
        Request::Sessions,
        Request::CloseSession("s".to_owned()),
        Request::Follow(FollowRequest {
            caller: caller("s"),
            job: job(),
            stream: None,
            from: FollowFrom::Start,
            any_session: false,
        }),
        Request::Send(SendRequest {
            caller: caller("s"),
            job: job(),
            bytes: b"y\n".to_vec(),
            eof: false,
            keys: Vec::new(),
            literal: false,
            screen_settle_ms: None,
            any_session: false,
        }),
        Request::Grep(GrepRequest {
            caller: caller("s"),
            job: job(),
            stream: StreamName::Stdout,
            pattern: "x".to_owned(),
            context: 0,
            offset: 0,
            limit: None,
            any_session: false,
        }),
        Request::Cancel(1),
        Request::Screen(job_request()),
        Request::Resize(ResizeRequest {
            caller: caller("s"),
            job: job(),
            size: PtySize::default(),
            any_session: false,
        }),
        Request::Shutdown,
        Request::WaitMany(WaitManyRequest {
            waits: vec![wait("first"), wait("second")],
            all: true,
            timeout_ms: None,
        }),
        Request::Top(TopRequest {
            caller: caller("top-1"),
            jobs: Vec::new(),
        }),
        Request::Watch(WatchRequest {
            caller: caller("top-1"),
        }),
        // Acts for the person, never a session: a host grant names one as data.
        Request::Allow(crate::AllowRequest::Host {
            host: "pypi.org".to_owned(),
            port: Some(443),
            session: Some("s".to_owned()),
            secs: None,
        }),
    ]
}

/// The variant's name, as `Debug` begins.
fn kind(request: &Request) -> String {
    let shown = format!("{request:?}");
    shown.split('(').next().unwrap_or_default().to_owned()
}

/// How many owner fields a request holds, wherever they are in it (a `Caller`,
/// `ExecParams`, or what a new request adds).
fn owner_fields(request: &Request) -> usize {
    let shown = format!("{request:?}");
    shown.matches("{ owner: ").count() + shown.matches(", owner: ").count()
}

/// The names of `T`'s variants as its derived `Deserialize` knows them: a deserializer
/// that only listens for the list.
fn variants<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Listen<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Listen<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not an enum"))
        }

        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = variants;
            Err(de::Error::custom("listened"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
            struct identifier ignored_any
        }
    }
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Listen(&mut names));
    names
}

/// A request added to the protocol has a sample above, so the test below judges it.
#[test]
fn every_kind_of_request_is_here() {
    let mut known: Vec<&str> = variants::<Request>().to_vec();
    let mut here: Vec<String> = every_request().iter().map(kind).collect();
    known.sort_unstable();
    here.sort_unstable();
    assert!(!known.is_empty());
    assert_eq!(here, known);
}

/// Every owner a request holds is one of its callers', so the daemon fills it in and a
/// client to another host clears it: a new request with a caller that the list in
/// `message.rs` leaves out fails here, unless it acts for none on purpose.
#[test]
fn every_request_that_names_an_owner_lists_its_callers() {
    for mut request in every_request() {
        let kind = kind(&request);
        let held = owner_fields(&request);
        let listed = request.callers().count();
        if CARRY_A_CALLER_BUT_ACT_FOR_NONE.contains(&kind.as_str()) {
            assert_eq!((held, listed), (1, 0), "{request:?}");
            assert_eq!(request.session(), None);
            continue;
        }
        assert_eq!(listed, held, "{request:?}");
        assert_eq!(
            request.session(),
            request
                .callers()
                .next()
                .map(|caller| caller.session.as_str())
        );
        // What a client to another host does: no owner of this machine is left.
        for owner in request.owners_mut() {
            *owner = None;
        }
        assert!(request.callers().all(|caller| caller.owner.is_none()));
        assert_eq!(
            format!("{request:?}").matches("owner: Some").count(),
            0,
            "{request:?}"
        );
    }
}

#[test]
fn a_wait_on_several_jobs_acts_for_each_waits_caller() {
    let mut many = every_request()
        .into_iter()
        .find(|request| matches!(request, Request::WaitMany(_)))
        .unwrap();
    let sessions: Vec<&str> = many.callers().map(|c| c.session.as_str()).collect();
    assert_eq!(sessions, ["first", "second"]);
    assert_eq!(many.session(), Some("first"));
    for caller in many.callers_mut() {
        caller.session.push_str("-changed");
    }
    assert_eq!(many.session(), Some("first-changed"));
}
