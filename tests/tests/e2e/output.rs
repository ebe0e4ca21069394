//! The output pipeline as an agent sees it: sanitized text, line-aligned limits in each
//! direction, spill files that hold the whole stream, and `bashc output` paging.

use std::time::Duration;

use bashc::protocol::{OutputRequest, Request, Response, StreamName};
use bashd_tests::Daemon;
use bashd_tests::procs::memory_kib;

use bashd_tests::output::numbered;

use crate::{json, show, stderr, stdout};

fn text(stream: &serde_json::Value) -> &str {
    stream["text"].as_str().expect("text is a string")
}

fn spill_file(stream: &serde_json::Value) -> Vec<u8> {
    let path = stream["full_output"]
        .as_str()
        .unwrap_or_else(|| panic!("no full_output in {stream}"));
    std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

#[test]
fn a_long_output_shows_its_last_lines_and_spills_whole() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--", "seq 1 10000"]);
    let out = &result["stdout"];
    assert_eq!(text(out), numbered(8001..=10000), "{result}");
    assert_eq!(out["truncated"], true);
    assert_eq!(out["truncated_by"], "lines");
    assert_eq!(out["total_lines"], 10000);
    assert_eq!(out["total_bytes"], numbered(1..=10000).len());
    assert_eq!(out["shown_lines"], 2000);
    assert_eq!(spill_file(out), numbered(1..=10000).into_bytes());
    let path = out["full_output"].as_str().unwrap();
    let expected = format!(
        "{}/sessions/test/{}.stdout",
        daemon.runtime_dir().display(),
        result["job"].as_str().unwrap()
    );
    assert_eq!(path, expected);

    let out = daemon.run_bashc(&["exec", "--", "seq 1 10000"]);
    let printed = stdout(&out);
    let job = printed
        .split(" --offset")
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap();
    let notice = format!(
        "[stdout: showing last 2000 of 10000 lines. The rest: bashc output {job} --offset 1 --limit 8000. Full output: "
    );
    assert!(
        printed.contains(&format!("\n10000\n{notice}")),
        "{}",
        show(&out)
    );
}

#[test]
fn the_byte_limit_cuts_between_whole_lines() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--", "for i in $(seq 200); do printf '%0999d\\n' $i; done"]);
    let out = &result["stdout"];
    assert_eq!(out["truncated_by"], "bytes", "{result}");
    let shown = text(out);
    assert!(shown.len() <= 51200, "{} bytes shown", shown.len());
    assert_eq!(out["shown_bytes"], shown.len());
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 51);
    assert!(lines.iter().all(|l| l.len() == 999), "a shown line is cut");
    assert_eq!(lines.last().unwrap().trim_start_matches('0'), "200");
    assert_eq!(out["total_bytes"], 200_000);
}

#[test]
fn multibyte_text_is_never_garbled() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&[
        "--",
        "for i in $(seq 6000); do echo \"Zeile $i: grüße, 世界 🦀\"; done",
    ]);
    let out = &result["stdout"];
    let shown = text(out);
    assert!(!shown.contains('\u{FFFD}'), "{shown}");
    assert!(shown.len() <= 51200);
    for line in shown.lines() {
        let rest = line.strip_prefix("Zeile ").expect("a whole line");
        let (n, tail) = rest.split_once(':').expect("a whole line");
        assert!(n.parse::<u32>().is_ok(), "{line}");
        assert_eq!(tail, " grüße, 世界 🦀");
    }
    assert_eq!(out["total_lines"], 6000);
}

#[test]
fn one_line_longer_than_the_limit_is_cut_on_a_char_boundary_and_marked() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&[
        "--",
        "head -c 150000 /dev/zero | tr '\\0' x | sed 's/x/é/g'",
    ]);
    let out = &result["stdout"];
    let shown = text(out);
    assert!(shown.len() <= 51200, "{} bytes shown", shown.len());
    assert!(shown.len() > 51000);
    assert!(shown.trim_end().chars().all(|c| c == 'é'));
    assert_eq!(out["partial"], true);
    assert_eq!(out["truncated_by"], "bytes");
    assert_eq!(out["total_lines"], 1);
    assert_eq!(out["total_bytes"], 300_000);

    let out = daemon.run_bashc(&["exec", "--", "head -c 300000 /dev/zero | tr '\\0' x"]);
    assert!(
        stdout(&out).contains(
            " --offset 1 --limit 1. Full output: "
        ) && stdout(&out).contains(
            "[stdout: showing last 51200 of 300000 bytes of a single long line. The rest: bashc output j"
        ),
        "{}",
        show(&out)
    );
}

#[test]
fn terminal_control_output_becomes_plain_text() {
    let daemon = Daemon::start();
    let cases = [
        ("printf '10%%\\r50%%\\r100%%\\n'", "100%\n"),
        ("printf '\\033[1;31mred\\033[0m plain\\n'", "red plain\n"),
        ("printf '\\033]0;a title\\007text\\n'", "text\n"),
        (
            "printf '\\033]8;;http://x\\033\\\\link\\033]8;;\\033\\\\\\n'",
            "link\n",
        ),
        ("printf 'dos\\r\\nline\\r\\n'", "dos\nline\n"),
        ("printf 'a\\000b\\007c\\013d\\n'", "abcd\n"),
        ("printf 'bad \\377 byte\\n'", "bad \u{FFFD} byte\n"),
        (
            "printf '\\r\\033[K[==  ] 50%%\\r\\033[K[====] 100%%\\n'",
            "[====] 100%\n",
        ),
    ];
    for (command, expected) in cases {
        let result = daemon.exec_json(&["--", command]);
        assert_eq!(text(&result["stdout"]), expected, "{command}: {result}");
    }
}

#[test]
fn random_bytes_come_out_as_valid_text_within_the_limits() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--", "head -c 200000 /dev/urandom"]);
    let out = &result["stdout"];
    let shown = text(out);
    assert!(shown.len() <= 51200, "{} bytes shown", shown.len());
    assert!(out["shown_lines"].as_u64().unwrap() <= 2000);
    assert!(
        shown
            .chars()
            .all(|c| c == '\n' || c == '\t' || !c.is_control()),
        "a control character survived"
    );
    let whole = spill_file(out);
    let whole = String::from_utf8(whole).expect("the spill file is UTF-8");
    assert!(
        whole.ends_with(shown),
        "the shown text is the end of the whole"
    );
}

#[test]
fn head_tail_and_line_counts_choose_what_is_shown() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--direction", "head_tail", "--", "seq 1 10000"]);
    let out = &result["stdout"];
    let shown = text(out);
    assert!(shown.starts_with("1\n2\n"), "{shown}");
    assert!(shown.ends_with("\n9999\n10000\n"));
    assert!(shown.contains("\n1000\n... [8000 lines omitted] ...\n9001\n"));
    assert_eq!(out["direction"], "head_tail");
    assert!(shown.len() <= 51200);

    let result = daemon.exec_json(&["--head", "5", "--", "seq 1 100"]);
    let out = &result["stdout"];
    assert_eq!(text(out), numbered(1..=5));
    assert_eq!(out["total_lines"], 100);
    assert_eq!(out["direction"], "head");
    assert_eq!(
        out["full_output"],
        serde_json::Value::Null,
        "100 lines is within the limits"
    );

    let result = daemon.exec_json(&["--tail", "3", "--", "seq 1 100"]);
    assert_eq!(text(&result["stdout"]), numbered(98..=100));

    let out = daemon.run_bashc(&["exec", "--direction", "head", "--", "seq 1 5000"]);
    assert!(
        stdout(&out).contains(
            "\n2000\n[stdout: showing first 2000 of 5000 lines. The rest: bashc output j"
        ) && stdout(&out).contains(" --offset 2001 --limit 3000. Full output: "),
        "{}",
        show(&out)
    );
}

#[test]
fn stderr_spills_to_its_own_file_and_small_output_to_none() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--", "echo small; seq 1 3000 >&2"]);
    let err = &result["stderr"];
    let path = err["full_output"].as_str().expect("stderr spilled");
    assert!(path.ends_with(".stderr"), "{path}");
    assert_eq!(spill_file(err), numbered(1..=3000).into_bytes());
    let out = &result["stdout"];
    assert_eq!(out["truncated"], false);
    assert_eq!(out["full_output"], serde_json::Value::Null);
    let job = result["job"].as_str().unwrap();
    let session_dir = daemon.runtime_dir().join("sessions/test");
    assert!(!session_dir.join(format!("{job}.stdout")).exists());

    let result = daemon.exec_json(&["--", "echo hi"]);
    let job = result["job"].as_str().unwrap();
    assert_eq!(result["stdout"]["truncated"], false);
    assert!(!session_dir.join(format!("{job}.stdout")).exists());
    assert!(!session_dir.join(format!("{job}.stderr")).exists());
}

#[test]
fn merged_stderr_is_one_section_in_order() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--merge-stderr", "--", "echo a; echo b >&2; echo c"]);
    assert_eq!(text(&result["stdout"]), "a\nb\nc\n", "{result}");
    assert_eq!(result["stderr"], serde_json::Value::Null);
    let job = result["job"].as_str().unwrap();
    let out = daemon.run_bashc(&["output", job, "--stream", "stderr"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(
        stderr(&out).contains("ran with stderr merged into stdout"),
        "{}",
        show(&out)
    );
}

#[test]
fn output_pages_through_the_whole_stream() {
    let daemon = Daemon::start();
    let result = daemon.exec_json(&["--", "seq 1 10000; echo err >&2"]);
    let job = result["job"].as_str().unwrap();

    let out = daemon.run_bashc(&["output", job, "--offset", "9990", "--limit", "5"]);
    assert_eq!(stdout(&out), numbered(9990..=9994), "{}", show(&out));
    assert_eq!(out.status.code(), Some(0));

    let out = daemon.run_bashc(&["output", job]);
    assert_eq!(
        stdout(&out),
        numbered(1..=2000),
        "the default page is max_lines"
    );

    let out = daemon.run_bashc(&["output", job, "--offset", "9999", "--json"]);
    let page = json(&out);
    assert_eq!(page["offset"], 9999);
    assert_eq!(page["lines"], 2);
    assert_eq!(page["text"], "9999\n10000\n");
    assert_eq!(page["next_offset"], serde_json::Value::Null);
    assert_eq!(page["total_lines"], 10000);
    assert_eq!(page["complete"], true);

    // Output that never passed a limit is paged from memory.
    let out = daemon.run_bashc(&["output", job, "--stream", "stderr"]);
    assert_eq!(stdout(&out), "err\n", "{}", show(&out));

    let out = daemon.run_bashc(&["output", "j999"]);
    assert_eq!(out.status.code(), Some(255));
    assert!(stderr(&out).contains("j999"), "{}", show(&out));
}

#[test]
fn pages_deep_into_a_file_of_several_mebibytes_are_exact() {
    let daemon = Daemon::start();
    // 3.4 MB of lines of 1 to 6 digits: pages start reading near their first line.
    let result = daemon.exec_json(&["--", "seq 1 500000"]);
    let job = result["job"].as_str().unwrap();
    for offset in [1, 149_795, 187_000, 299_999, 333_333, 499_990] {
        let out = daemon.run_bashc(&[
            "output",
            job,
            "--offset",
            &offset.to_string(),
            "--limit",
            "7",
        ]);
        let last = (offset + 6).min(500_000);
        assert_eq!(
            stdout(&out),
            numbered(offset..=last),
            "offset {offset}: {}",
            show(&out)
        );
    }
    let out = daemon.run_bashc(&["output", job, "--offset", "500001"]);
    assert_eq!(stdout(&out), "", "{}", show(&out));
}

#[tokio::test]
async fn a_running_jobs_output_can_be_paged() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let mut responses = client
        .request(Request::Exec(
            daemon.params("seq 1 5; printf partial; sleep 60"),
        ))
        .await
        .unwrap();
    let Response::Started(started) = responses.next().await.unwrap() else {
        panic!("no Started response");
    };
    let request = OutputRequest {
        job: bashc::protocol::JobRef::Id(started.job.to_string()),
        stream: StreamName::Stdout,
        offset: 4,
        limit: None,
        caller: daemon.caller(),
        any_session: false,
        max_bytes: None,
        from_end: false,
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let page = loop {
        let page = client.output(request.clone()).await.unwrap();
        if page.text == "4\n5\npartial" || tokio::time::Instant::now() > deadline {
            break page;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(page.text, "4\n5\npartial", "{page:?}");
    assert!(!page.complete);
    assert_eq!(page.total_lines, 6);
    drop(responses);
}

#[test]
fn a_spill_file_that_cannot_be_written_is_named_and_the_job_goes_on() {
    let daemon = Daemon::start();
    let sessions = daemon.runtime_dir().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(sessions.join("test"), "not a directory").unwrap();
    let result = daemon.exec_json(&["--", "seq 1 5000; echo done >&2"]);
    assert_eq!(result["exit_code"], 0, "{result}");
    assert_eq!(result["stdout"]["total_lines"], 5000);
    assert_eq!(text(&result["stdout"]), numbered(3001..=5000));
    let notice = result["notice"].as_str().expect("a notice");
    let path = format!("{}/test/", sessions.display());
    assert!(
        notice.starts_with(&format!("Full output file may be incomplete: {path}")),
        "{notice}"
    );
    assert_eq!(text(&result["stderr"]), "done\n");
}

#[test]
fn three_hundred_megabytes_keep_the_daemon_small() {
    let daemon = Daemon::start();
    let line = "a line of output that repeats";
    let command = format!("yes '{line}' | head -c 300000000");
    let result = daemon.exec_json(&["--mode", "slow", "--", &command]);
    let out = &result["stdout"];
    assert_eq!(out["total_bytes"], 300_000_000u64, "{result}");
    let line_bytes = line.len() as u64 + 1;
    assert_eq!(out["total_lines"], 300_000_000u64.div_ceil(line_bytes));
    let path = out["full_output"].as_str().unwrap();
    let size = std::fs::metadata(path).unwrap().len();
    assert_eq!(size, 100 * 1024 * 1024);
    let notice = result["notice"].as_str().expect("a notice");
    assert!(notice.contains("truncated at 100 MiB"), "{notice}");
    let peak = memory_kib(daemon.pid(), "VmHWM").expect("VmHWM of the daemon");
    assert!(peak < 64 * 1024, "daemon peak RSS {peak} KiB");
}

/// Issue 15: `bashc output` pages hold whole lines within the byte cap (the job's
/// 50 KiB by default), stderr names the next page, and following it shows every line
/// exactly once.
#[test]
fn bashc_output_pages_whole_lines_under_the_byte_cap() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--",
        "for i in $(seq 1 500); do printf 'row %03d %0300d\\n' $i $i; done",
    ]);
    let job = json(&out)["job"].as_str().unwrap().to_owned();
    let mut offset = "1".to_owned();
    let mut seen = String::new();
    for _ in 0..20 {
        let page = daemon.run_bashc(&["output", &job, "--offset", &offset, "--max-bytes", "20000"]);
        assert!(page.status.success(), "{}", show(&page));
        let text = stdout(&page);
        assert!(
            text.len() <= 20_000 && text.ends_with('\n'),
            "{}",
            text.len()
        );
        seen.push_str(&text);
        let note = stderr(&page);
        match note.split_once("next page: ") {
            Some((range, next)) => {
                assert!(range.contains(" of 500 shown"), "{note}");
                let next = next.trim();
                assert!(
                    next.starts_with(&format!("bashc output {job} --offset ")),
                    "{note}"
                );
                offset = next.rsplit(' ').next().unwrap().to_owned();
            }
            None => break,
        }
    }
    let expected: String = (1..=500)
        .map(|i| format!("row {i:03} {i:0300}\n"))
        .collect();
    assert!(seen == expected, "pages skipped or repeated lines");
    // The default page is the job's 50 KiB.
    let page = daemon.run_bashc(&["output", &job]);
    assert!(stdout(&page).len() <= 51_200, "{}", stdout(&page).len());
    assert!(stderr(&page).contains("next page: "), "{}", show(&page));
}

/// Issue 15: past the spill cap, the page and its notice agree on the last line kept.
#[test]
fn a_capped_spill_file_ends_at_the_last_whole_line() {
    let daemon = Daemon::start_with_config("[limits]\nmax_spill_bytes = 1000\nmax_lines = 10\n");
    // 7-byte lines: the cap of 1000 bytes falls inside line 143.
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--",
        "for i in $(seq 1 200); do printf 'l%05d\\n' $i; done",
    ]);
    let result = json(&out);
    let job = result["job"].as_str().unwrap().to_owned();
    assert!(
        result["notice"]
            .as_str()
            .unwrap()
            .contains("holds the first 1000 of 1400 bytes"),
        "{result}"
    );
    let page = daemon.run_bashc(&["output", &job, "--offset", "141"]);
    assert_eq!(stdout(&page), "l00141\nl00142\n", "{}", show(&page));
    assert!(
        stderr(&page).contains("after line 142; the 58 lines after it were not kept"),
        "{}",
        show(&page)
    );
}
