use super::*;
use bashd_protocol::{JobId, StreamResult};

fn params(sandbox: Option<SandboxProfile>, network: Option<Network>) -> ExecParams {
    ExecParams {
        sandbox,
        network,
        ..ExecParams::new("true", "s", "/w")
    }
}

/// [`super::decide`] with no grant, its refusal as a client that cannot ask reads it.
fn decide(
    config: &SandboxConfig,
    params: &ExecParams,
    around: Option<&channel::Origin>,
) -> Result<Option<SandboxInForce>, bashd_protocol::ErrorReply> {
    super::decide(config, params, around, &[]).map_err(Refused::error)
}

/// [`super::spec`] for a job granted no `.git` write.
fn spec(
    in_force: SandboxInForce,
    config: &SandboxConfig,
    roots: &roots::Roots,
    tmpdir: Option<&Path>,
    runtime_dir: &Path,
) -> confine::Spec {
    super::spec(in_force, config, roots, tmpdir, runtime_dir, false)
}

fn config(default: SandboxProfile, network: Network, floor: SandboxProfile) -> SandboxConfig {
    SandboxConfig {
        default: Some(default),
        network: Some(network),
        floor: Some(floor),
        ..SandboxConfig::default()
    }
}

#[test]
fn a_client_may_tighten_but_never_loosen_past_the_floor() {
    use Network::{Off as NetOff, On};
    use SandboxProfile::*;
    let open = config(Off, On, Off);
    assert_eq!(decide(&open, &params(None, None), None), Ok(None));
    assert_eq!(
        decide(&open, &params(Some(ReadOnly), Some(NetOff)), None),
        Ok(Some(SandboxInForce {
            profile: ReadOnly,
            network: NetOff
        }))
    );

    let floored = config(WorkspaceWrite, On, WorkspaceWrite);
    let error = decide(&floored, &params(Some(Off), None), None)
        .unwrap_err()
        .message;
    assert!(error.contains("floor = \"workspace-write\""), "{error}");
    assert!(error.contains("workspace-write or read-only"), "{error}");
    assert_eq!(
        decide(&floored, &params(Some(ReadOnly), None), None),
        Ok(Some(SandboxInForce {
            profile: ReadOnly,
            network: On
        }))
    );

    // With a floor, the config's network off is a floor too; without one, a default.
    // Past either floor is an ask (issue 44), which a grant as loose lets through.
    let offline = config(WorkspaceWrite, NetOff, WorkspaceWrite);
    let asked = super::decide(&offline, &params(None, Some(On)), None, &[]).unwrap_err();
    assert!(matches!(asked, Refused::Ask { .. }), "{asked:?}");
    let on = SandboxInForce {
        profile: WorkspaceWrite,
        network: On,
    };
    assert_eq!(
        super::decide(&offline, &params(None, Some(On)), None, &[on]),
        Ok(Some(on))
    );
    let error = super::decide(&offline, &params(Some(Off), Some(On)), None, &[on]);
    assert!(matches!(error, Err(Refused::Ask { .. })), "{error:?}");
    let offline_by_default = config(WorkspaceWrite, NetOff, Off);
    assert_eq!(
        decide(&offline_by_default, &params(None, Some(On)), None),
        Ok(Some(SandboxInForce {
            profile: WorkspaceWrite,
            network: On
        }))
    );
}

/// With `[sandbox]` silent (issue 44), an MCP call runs `workspace-write` on the
/// allow-list and a looser one is an ask; the command line runs unconfined as before.
/// A written `default = "off"` with `network = "on"` turns the agent's off.
#[test]
fn an_unset_sandbox_confines_mcp_calls_and_not_the_command_line() {
    use SandboxProfile::*;
    let silent = SandboxConfig::default();
    let mcp = |sandbox, network| ExecParams {
        mcp_call: true,
        ..params(sandbox, network)
    };
    assert_eq!(
        decide(&silent, &mcp(None, None), None),
        Ok(Some(SandboxInForce {
            profile: WorkspaceWrite,
            network: Network::AllowList
        }))
    );
    for looser in [mcp(Some(Off), None), mcp(None, Some(Network::On))] {
        let asked = super::decide(&silent, &looser, None, &[]).unwrap_err();
        let Refused::Ask { why, .. } = asked else {
            panic!("{asked:?}")
        };
        assert!(why.contains("by default for an agent's MCP calls"), "{why}");
    }
    assert_eq!(decide(&silent, &params(None, None), None), Ok(None));
    assert_eq!(decide(&silent, &params(Some(Off), None), None), Ok(None));

    let off = SandboxConfig {
        default: Some(Off),
        network: Some(Network::On),
        ..SandboxConfig::default()
    };
    assert_eq!(decide(&off, &mcp(None, None), None), Ok(None));
    assert_eq!(
        decide(&off, &mcp(Some(Off), Some(Network::On)), None),
        Ok(None)
    );
}

#[test]
fn the_network_floor_orders_off_below_allow_list_below_on() {
    use Network::{AllowList, Off as NetOff, On};
    use SandboxProfile::WorkspaceWrite;
    let listed = config(WorkspaceWrite, AllowList, WorkspaceWrite);
    let in_force = |network| {
        Ok(Some(SandboxInForce {
            profile: WorkspaceWrite,
            network,
        }))
    };
    assert_eq!(
        decide(&listed, &params(None, None), None),
        in_force(AllowList)
    );
    assert_eq!(
        decide(&listed, &params(None, Some(NetOff)), None),
        in_force(NetOff)
    );
    let error = decide(&listed, &params(None, Some(On)), None).unwrap_err();
    assert!(
        error
            .message
            .contains("is turned on only with a person's yes"),
        "{}",
        error.message
    );
    let offline = config(WorkspaceWrite, NetOff, WorkspaceWrite);
    let error = decide(&offline, &params(None, Some(AllowList)), None).unwrap_err();
    assert!(
        error
            .message
            .contains("is loosened to allow-list only with"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains("network = \"off\""),
        "{}",
        error.message
    );
    assert_ne!(
        error.hint,
        Some(bashd_protocol::ErrorHint::NetworkOn),
        "no hint turns the network on for an allow-list"
    );
}

#[test]
fn a_job_started_from_inside_a_sandbox_gets_no_more_than_it() {
    use Network::{Off as NetOff, On};
    use SandboxProfile::*;
    let open = config(Off, On, Off);
    let outer = SandboxInForce {
        profile: WorkspaceWrite,
        network: NetOff,
    };
    let origin = channel::Origin {
        job: JobId(7),
        session: "s".into(),
        sandbox: outer,
        roots: std::sync::Arc::new(roots::Roots {
            paths: vec![PathBuf::from("/ws")],
            caller: None,
        }),
    };
    let around = Some(&origin);
    // Its sandbox is the default, and anything tighter goes.
    assert_eq!(decide(&open, &params(None, None), around), Ok(Some(outer)));
    assert_eq!(
        decide(&open, &params(Some(ReadOnly), None), around),
        Ok(Some(SandboxInForce {
            profile: ReadOnly,
            network: NetOff
        }))
    );
    // Looser is refused, naming the job, even where the floor would allow it.
    let error = decide(&open, &params(Some(Off), None), around).unwrap_err();
    assert_eq!(error.hint, Some(bashd_protocol::ErrorHint::SameSandbox));
    let error = error.message;
    assert!(
        error.contains(
            "this job (j7) runs under workspace-write with the network off; a job it starts can be as tight, not looser"
        ),
        "{error}"
    );
    assert!(decide(&open, &params(None, Some(On)), around).is_err());
}

#[test]
fn each_profile_writes_where_it_says() {
    let config = SandboxConfig {
        deny_read: vec![PathBuf::from("/home/u/.ssh")],
        ..SandboxConfig::default()
    };
    // The roots as decided for the session (`roots.rs`), not the workdir.
    let roots = roots::Roots {
        paths: vec![PathBuf::from("/w"), PathBuf::from("/cache")],
        caller: None,
    };
    let (workdir, tmp) = (&roots, Path::new("/r/sessions/s/tmp"));
    let workspace = spec(
        SandboxInForce {
            profile: SandboxProfile::WorkspaceWrite,
            network: Network::On,
        },
        &config,
        workdir,
        Some(tmp),
        Path::new("/r"),
    );
    assert!(workspace.files && !workspace.network_off);
    assert_eq!(
        workspace.writable,
        [Path::new("/w"), Path::new("/cache"), tmp]
    );
    assert_eq!(workspace.deny_read, config.deny_read);
    assert_eq!(workspace.runtime_dir.as_deref(), Some(Path::new("/r")));

    let read_only = spec(
        SandboxInForce {
            profile: SandboxProfile::ReadOnly,
            network: Network::Off,
        },
        &config,
        workdir,
        Some(tmp),
        Path::new("/r"),
    );
    assert_eq!(read_only.writable, [tmp]);
    assert!(read_only.network_off);

    let network_only = spec(
        SandboxInForce {
            profile: SandboxProfile::Off,
            network: Network::Off,
        },
        &config,
        workdir,
        None,
        Path::new("/r"),
    );
    assert!(!network_only.files && network_only.writable.is_empty());
    assert!(network_only.deny_read.is_empty() && network_only.runtime_dir.is_none());
    assert!(!workspace.unix_sockets && !read_only.unix_sockets && !network_only.unix_sockets);
}

#[test]
fn unix_sockets_in_the_config_open_them_only_to_a_file_sandbox_with_the_network_on() {
    let config = SandboxConfig {
        unix_sockets: vec![PathBuf::from("/run/user/1000/bus")],
        ..SandboxConfig::default()
    };
    let with = |profile, network| {
        spec(
            SandboxInForce { profile, network },
            &config,
            &roots::Roots::default(),
            None,
            Path::new("/r"),
        )
        .unix_sockets
    };
    assert!(with(SandboxProfile::ReadOnly, Network::On));
    assert!(with(SandboxProfile::WorkspaceWrite, Network::On));
    assert!(!with(SandboxProfile::ReadOnly, Network::Off));
    assert!(!with(SandboxProfile::Off, Network::Off));
}

#[test]
fn home_paths_expand_and_relative_ones_are_refused() {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap());
    assert_eq!(expand_home("~/.ssh"), Ok(home.join(".ssh")));
    assert_eq!(expand_home("/etc/x"), Ok(PathBuf::from("/etc/x")));
    assert!(expand_home("relative/x").is_err());
}

fn result(sandbox: Option<SandboxInForce>, exit: i32, stderr: &str) -> ExecResult {
    let stream = |text: &str| StreamResult {
        text: text.to_owned(),
        ..StreamResult::empty()
    };
    ExecResult {
        job: JobId(1),
        session: "s".into(),
        pid: Some(1),
        state: JobState::Exited,
        exit_code: Some(exit),
        signal: None,
        duration_ms: 1,
        backgrounded: false,
        description: None,
        workdir: "/w".into(),
        stdout: stream(""),
        stderr: Some(stream(stderr)),
        notices: Vec::new(),
        record: None,
        sandbox,
        screen: None,
    }
}

#[test]
fn a_failure_that_reads_like_a_refusal_gets_the_notice() {
    let workspace = Some(SandboxInForce {
        profile: SandboxProfile::WorkspaceWrite,
        network: Network::Off,
    });
    let denied = "touch: cannot touch '/outside/x': Permission denied\n";
    let notice = |denied| Notice::SandboxDenied {
        profile: SandboxProfile::WorkspaceWrite,
        network: Network::Off,
        denied,
    };
    assert_eq!(
        refusal(&result(workspace, 1, denied), &[]),
        [notice(SandboxDenial::Files)]
    );
    let offline = "curl: (6) Could not resolve host: example.org\n";
    assert_eq!(
        refusal(&result(workspace, 6, offline), &[]),
        [notice(SandboxDenial::Network)]
    );
    assert_eq!(
        refusal(&result(workspace, 1, &format!("{denied}{offline}")), &[]).len(),
        2
    );
    // Unconfined, succeeded, or failed for a reason of its own: no notice.
    assert_eq!(refusal(&result(None, 1, denied), &[]), []);
    assert_eq!(refusal(&result(workspace, 0, denied), &[]), []);
    assert_eq!(refusal(&result(workspace, 1, "no such file\n"), &[]), []);
}

/// Issue 33: a refused read of a hidden path is told as such, not as a write.
#[test]
fn a_refused_read_of_a_hidden_path_is_told_apart_from_a_write() {
    let read_only = Some(SandboxInForce {
        profile: SandboxProfile::ReadOnly,
        network: Network::On,
    });
    let hidden = [
        PathBuf::from("/home/me/.ssh"),
        PathBuf::from("/home/me/.netrc"),
    ];
    let denial = |text: &str| match refusal(&result(read_only, 1, text), &hidden).as_slice() {
        [Notice::SandboxDenied { denied, .. }] => *denied,
        other => panic!("one sandbox notice expected for {text:?}, got {other:?}"),
    };
    for read in [
        "cat: /home/me/.ssh/id_ed25519: Permission denied\n",
        "ls: cannot open directory '/home/me/.ssh': Permission denied\n",
        "curl: (26) Failed to open/read local data from file \"/home/me/.netrc\": Permission denied\n",
    ] {
        assert_eq!(denial(read), SandboxDenial::Read, "{read}");
    }
    // Both refused: both told.
    let both = "cat: /home/me/.ssh/id_ed25519: Permission denied\ntouch: cannot touch '/x': Permission denied\n";
    let denied: Vec<SandboxDenial> = refusal(&result(read_only, 1, both), &hidden)
        .into_iter()
        .map(|notice| match notice {
            Notice::SandboxDenied { denied, .. } => denied,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(denied, [SandboxDenial::Files, SandboxDenial::Read]);
    for write in [
        "touch: cannot touch '/home/me/project/x': Permission denied\n",
        "bash: line 1: /home/me/.sshx: Read-only file system\n",
        "mkdir: cannot create directory '/home/me/out': Permission denied\n",
    ] {
        assert_eq!(denial(write), SandboxDenial::Files, "{write}");
    }
}

#[test]
fn the_sandbox_section_reads_its_keys_and_names_a_bad_one() {
    use crate::config::Config;
    let parse = |text: &str| Config::parse(text, Path::new("/c.toml")).map_err(|e| e.to_string());
    let config = parse(
        "[sandbox]\ndefault = \"read-only\"\nnetwork = \"off\"\nfloor = \"workspace-write\"\nwritable = [\"/cache\", \"~/.cache\"]\ndeny_read = [\"~/.secret\"]\nunix_sockets = [\"/run/user/1000/bus\"]\n",
    )
    .unwrap();
    let home = PathBuf::from(std::env::var_os("HOME").unwrap());
    assert_eq!(
        config.sandbox,
        SandboxConfig {
            default: Some(SandboxProfile::ReadOnly),
            network: Some(Network::Off),
            writable: vec![PathBuf::from("/cache"), home.join(".cache")],
            deny_read: vec![home.join(".secret")],
            unix_sockets: vec![PathBuf::from("/run/user/1000/bus")],
            floor: Some(SandboxProfile::WorkspaceWrite),
            ask: std::time::Duration::from_secs(120),
        }
    );
    // What --check-config prints loads to the same settings.
    let again = parse(&config.effective_toml()).unwrap();
    assert_eq!(again.sandbox, config.sandbox);

    let error = parse("[sandbox]\ndefault = \"loose\"\n").unwrap_err();
    assert!(error.contains("sandbox.default must be one of"), "{error}");
    let error = parse("[sandbox]\nwritable = [\"cache\"]\n").unwrap_err();
    assert!(error.contains("sandbox.writable"), "{error}");
    // Both written, a default looser than the floor is refused; a floor alone
    // tightens each front end's default to it (issue 44).
    let error = parse("[sandbox]\ndefault = \"off\"\nfloor = \"read-only\"\n").unwrap_err();
    assert!(
        error.contains("/c.toml:1:") && error.contains("looser than sandbox.floor"),
        "{error}"
    );
    let floored = parse("[sandbox]\nfloor = \"read-only\"\n").unwrap();
    for front_end in bashd_protocol::FrontEnd::ALL {
        let got = floored.sandbox.front_end(front_end);
        assert_eq!(
            got.default.profile,
            SandboxProfile::ReadOnly,
            "{front_end:?}"
        );
    }
    let error = parse("[sandbox]\nnetwork_off = true\n").unwrap_err();
    assert!(error.contains("known keys of [sandbox]"), "{error}");
}

/// On a system that cannot confine, an agent's call confined only by bashd's default
/// is told how the person turns that default off; a call from the command line, or
/// under a default the person wrote, is told only what is missing.
#[test]
fn a_default_this_system_cannot_hold_names_the_config_that_turns_it_off() {
    let missing = || refused("sandbox workspace-write needs Landlock ABI 3 or later".to_owned());
    let agent = ExecParams {
        mcp_call: true,
        ..params(None, None)
    };
    let told = cannot_hold(missing(), &SandboxConfig::default(), &agent).message;
    assert!(
        told.contains("needs Landlock") && told.contains("default = \"off\" and network = \"on\""),
        "{told}"
    );
    let written = config(
        SandboxProfile::WorkspaceWrite,
        Network::AllowList,
        SandboxProfile::Off,
    );
    for (config, params) in [
        (&SandboxConfig::default(), params(None, None)),
        (&written, agent.clone()),
    ] {
        let told = cannot_hold(missing(), config, &params).message;
        assert!(!told.contains("default = \"off\""), "{told}");
    }
}
