//! Where the person's own tools fetch from (issue 44, "confined by default"): the
//! hosts of the registries npm, pip, go, cargo and Maven are configured with, and of
//! the git remotes of the config's writable roots, each with where it was read. The
//! proxy's allow-list is `[sandbox] allow_hosts` plus these entries (issue 43).
//!
//! Everything is read from files outside every writable root and from the daemon's
//! own environment, never from a request: a confined job cannot add a host by
//! writing a file or by naming one in its environment. The tools are asked
//! themselves (`npm config get registry`, `go env`, pip's config and its own
//! default index) rather than given hosts written here, so no registry's host is
//! written in bashd. A source that is missing or fails is skipped with a debug log.
//!
//! Gathering runs off the startup path ([`follow`]): at start and after each reload,
//! in a task of its own, each tool run under a timeout, the result sent on a watch
//! channel to whoever builds the allow-list and the jobs' environment.
//!
//! The same sources give confined jobs their tools' registry URLs as environment
//! variables, without credentials (the files that hold tokens, `~/.npmrc` and the
//! like, are hidden by `deny_read`), and the caches bashd owns for the person
//! ([`Caches`]), which confined jobs write instead of the person's own.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::Config;
use crate::jobs::os::reaper::ReaperHandle;

/// How long one tool (`npm`, `go`, `python3`) may take to answer: a second or less
/// on an idle machine, several on a loaded one; nothing waits on it but the list.
const TOOL_TIMEOUT: Duration = Duration::from_secs(15);
/// The most of a tool's output that is read.
const TOOL_OUTPUT_BYTES: u64 = 256 * 1024;
/// The most of a config file that is read.
const FILE_BYTES: u64 = 1024 * 1024;

/// One host (`host` or `host:port`, as `[sandbox] allow_hosts` takes it) a tool of the
/// person's fetches from, and where bashd read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// `example.org` (ports 80 and 443), `example.org:8443`, `192.0.2.7:80`: an IP
    /// literal always with its port, as an IP literal without one allows every port.
    pub entry: String,
    /// Where it was read, as a person finds it again: `npm config get registry`,
    /// `~/.cargo/config.toml [registries.corp]`, `git remote origin of /src/app`.
    pub origin: String,
}

/// What one gathering found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSources {
    /// Each entry once, with the first place it was read.
    pub sources: Vec<Source>,
    /// The registry settings a confined job's tools get as environment variables
    /// (`npm_config_registry`, `PIP_INDEX_URL`, `GOPROXY`, ...), with no user or
    /// password in their URLs.
    pub env: Vec<(String, String)>,
    /// The caches confined jobs write, when the daemon has a place for them.
    pub caches: Option<Caches>,
}

impl ToolSources {
    /// The entries alone, for the allow-list.
    pub fn entries(&self) -> Vec<String> {
        self.sources.iter().map(|s| s.entry.clone()).collect()
    }

    /// The entries and the git remotes of a session's writable `roots` (read now:
    /// a root's `.git/config` is read-only to its confined jobs), for the allow-list
    /// of that session.
    pub fn for_roots(&self, roots: &[PathBuf]) -> Vec<Source> {
        let mut all = ToolSources {
            sources: self.sources.clone(),
            ..ToolSources::default()
        };
        for root in roots {
            for source in git_remotes(root) {
                all.add(Some(source.entry), &source.origin);
            }
        }
        all.sources
    }

    /// What a job confined in its files gets over its client's environment: its
    /// tools' registries and the caches bashd owns.
    pub fn job_env(&self) -> Vec<(String, String)> {
        let mut env = self.env.clone();
        if let Some(caches) = &self.caches {
            env.extend(caches.env());
        }
        env
    }

    fn add(&mut self, entry: Option<String>, origin: &str) {
        let Some(entry) = entry else {
            tracing::debug!("tool sources: {origin}: no host in it");
            return;
        };
        if !self.sources.iter().any(|s| s.entry == entry) {
            self.sources.push(Source {
                entry,
                origin: origin.to_owned(),
            });
        }
    }

    fn set_env(&mut self, key: &str, value: String) {
        if !self.env.iter().any(|(k, _)| k == key) {
            self.env.push((key.to_owned(), value));
        }
    }
}

/// The caches bashd owns for the person (`$XDG_CACHE_HOME/bashd/tools`, else
/// `~/.cache/bashd/tools`): on disk, so they last across reboots, and outside the
/// runtime dir, which may be a tmpfs. Confined jobs write here (npm, pip, go, and a
/// `CARGO_HOME` that carries the person's cargo config without credentials); the
/// person's own caches stay read-only to them, since a job that writes
/// `~/.cargo/registry` or `~/.m2` plants code the person runs later. What one
/// confined job leaves here, later confined jobs of the same person read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caches {
    pub dir: PathBuf,
}

impl Caches {
    /// The environment that points each tool at its cache.
    pub fn env(&self) -> Vec<(String, String)> {
        let at = |sub: &str| self.dir.join(sub).to_string_lossy().into_owned();
        vec![
            ("npm_config_cache".to_owned(), at("npm")),
            ("PIP_CACHE_DIR".to_owned(), at("pip")),
            ("GOMODCACHE".to_owned(), at("go-mod")),
            ("GOCACHE".to_owned(), at("go-build")),
            ("CARGO_HOME".to_owned(), at("cargo")),
        ]
    }

    /// Makes the cache directories (0700) where they are missing.
    pub fn make(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        for sub in ["npm", "pip", "go-mod", "go-build", "cargo"] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(self.dir.join(sub))?;
        }
        Ok(())
    }
}

/// The daemon's own environment, read once for a gathering (tests give their own).
#[derive(Debug, Clone, Default)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// The daemon's environment (variables that are not UTF-8 are left out).
    pub fn of_daemon() -> Environment {
        // `vars_os`: `vars` panics on a variable that is not UTF-8.
        Environment {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    pub fn from_vars<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Environment {
        Environment {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        self.get("HOME").map(PathBuf::from)
    }

    /// Where the person's cache directory is; `None` without `HOME`.
    fn caches(&self) -> Option<Caches> {
        let base = match self.get("XDG_CACHE_HOME").filter(|p| p.starts_with('/')) {
            Some(dir) => PathBuf::from(dir),
            None => self.home()?.join(".cache"),
        };
        Some(Caches {
            dir: base.join("bashd").join("tools"),
        })
    }

    fn cargo_home(&self) -> Option<PathBuf> {
        match self.get("CARGO_HOME") {
            Some(dir) => Some(PathBuf::from(dir)),
            None => Some(self.home()?.join(".cargo")),
        }
    }

    /// `program` on the daemon's `PATH`.
    fn find(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        self.get("PATH")?
            .split(':')
            .filter(|dir| dir.starts_with('/'))
            .map(|dir| Path::new(dir).join(program))
            .find(|path| {
                std::fs::metadata(path)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// `path` as a person reads it: `~/...` when under `HOME`.
    fn show(&self, path: &Path) -> String {
        if let Some(home) = self.home()
            && let Ok(rest) = path.strip_prefix(&home)
        {
            return format!("~/{}", rest.display());
        }
        path.display().to_string()
    }
}

/// Runs the tools bashd asks: through the daemon's reaper, the only code that waits
/// for its children. `None` (unit tests) asks no tool.
pub type Runner = Option<ReaperHandle>;

/// Gathers at start and after each config reload, off the startup path, and sends
/// each result on the returned channel (empty until the first gathering ends). The
/// task ends when the config's sender goes, at shutdown, even in a reading.
pub fn follow(
    mut config: watch::Receiver<Arc<Config>>,
    reaper: ReaperHandle,
) -> watch::Receiver<Arc<ToolSources>> {
    let (tx, rx) = watch::channel(Arc::new(ToolSources::default()));
    tokio::spawn(async move {
        loop {
            let writable = config.borrow_and_update().sandbox.writable.clone();
            let started = std::time::Instant::now();
            let (env, runner) = (Environment::of_daemon(), Some(reaper.clone()));
            let found = tokio::select! {
                found = gather(&env, &writable, &runner) => found,
                // A reload meanwhile starts again; a daemon that stops ends it, so it
                // holds no spawn handle that keeps the reaper waiting.
                changed = config.changed() => match changed {
                    Ok(()) => continue,
                    Err(_) => return,
                },
            };
            tracing::info!(
                "tool sources: {} hosts the person's tools fetch from, read in {} ms",
                found.sources.len(),
                started.elapsed().as_millis()
            );
            tx.send_replace(Arc::new(found));
            if config.changed().await.is_err() {
                return;
            }
        }
    });
    rx
}

/// Reads every source, in the order `bashc status` shows them. `writable` are the
/// config's writable roots, whose git remotes are read.
pub async fn gather(env: &Environment, writable: &[PathBuf], runner: &Runner) -> ToolSources {
    let (env2, writable2) = (env.clone(), writable.to_vec());
    // Files only, but a slow disk must not hold the runtime's threads. First, so that
    // the tools asked below write into bashd's caches rather than the person's home.
    let files = tokio::task::spawn_blocking(move || {
        let mut found = ToolSources {
            caches: env2.caches(),
            ..ToolSources::default()
        };
        if let Some(caches) = &found.caches
            && let Err(e) = caches
                .make()
                .and_then(|()| cargo_home_config(&env2, caches))
        {
            tracing::debug!(
                "tool sources: cannot make the caches in {}: {e}",
                caches.dir.display()
            );
            found.caches = None;
        }
        cargo(&env2, &mut found);
        maven(&env2, &mut found);
        for root in &writable2 {
            for source in git_remotes(root) {
                found.add(Some(source.entry), &source.origin);
            }
        }
        found
    })
    .await
    .unwrap_or_default();
    let start = || ToolSources {
        caches: files.caches.clone(),
        ..ToolSources::default()
    };
    let (mut from_npm, mut from_pip, mut from_go) = (start(), start(), start());
    // At once: each tool takes a while to start (npm and pip most), and a loaded
    // machine must not push one past its timeout for waiting on the others.
    tokio::join!(
        npm(env, runner, &mut from_npm),
        pip(env, runner, &mut from_pip),
        go(env, runner, &mut from_go),
    );
    let mut found = from_npm;
    for other in [from_pip, from_go] {
        for source in other.sources {
            found.add(Some(source.entry), &source.origin);
        }
        for (key, value) in other.env {
            found.set_env(&key, value);
        }
    }
    for source in files.sources {
        found.add(Some(source.entry), &source.origin);
    }
    for (key, value) in files.env {
        found.set_env(&key, value);
    }
    found
}

/// The stdout of `program args` run with the daemon's environment in `/` (so that no
/// project's own config is read), or why not.
async fn ask(
    env: &Environment,
    runner: &Runner,
    program: &str,
    args: &[&str],
    extra: &[(&str, String)],
) -> Result<String, String> {
    let Some(reaper) = runner else {
        return Err("no tool is run here".to_owned());
    };
    let path = env
        .find(program)
        .ok_or_else(|| format!("{program} is not on the daemon's PATH"))?;
    let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let mut command = Command::new(&path);
    command
        .args(args)
        .env_clear()
        .envs(&env.vars)
        // Nothing that fetches: no toolchain download by `go`, no update check by npm.
        .env("GOTOOLCHAIN", "local")
        .env("npm_config_update_notifier", "false")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .envs(extra.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    end_with_the_daemon(&mut command);
    let child = reaper
        .spawn(command)
        .await
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let read = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let _ = reader.take(TOOL_OUTPUT_BYTES).read_to_end(&mut out);
        out
    });
    // Ended with its group (what it started goes too, and the pipe closes) unless it
    // has exited: on a timeout, and when the reading is dropped (a reload, a stop),
    // so that no tool outlives it and keeps a stopping daemon's reaper waiting.
    let mut group = Group(Some(child.pid));
    let answered = tokio::time::timeout(TOOL_TIMEOUT, async {
        let out = read.await.unwrap_or_default();
        (out, child.exit.await)
    })
    .await;
    if answered.is_ok() {
        group.0 = None;
    }
    match answered {
        Ok((out, Ok(exit))) if exit.code() == Some(0) => Ok(String::from_utf8_lossy(&out).into()),
        Ok((_, exit)) => Err(format!("{program} {} failed ({exit:?})", args.join(" "))),
        Err(_) => {
            drop(group);
            Err(format!(
                "{program} {} took longer than {} s",
                args.join(" "),
                TOOL_TIMEOUT.as_secs()
            ))
        }
    }
}

/// A tool is killed when the daemon dies, even by SIGKILL, where nothing of the
/// daemon's runs to end it. The reaper forks it from one of the runtime's worker
/// threads, which live as long as the daemon, so the death signal is not sent early.
fn end_with_the_daemon(command: &mut Command) {
    let daemon = rustix::process::getpid();
    // SAFETY: between fork and exec the closure makes only async-signal-safe calls
    // (prctl, getppid) and allocates nothing.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // Died between the fork and the prctl: no signal will come.
            if rustix::process::getppid() != Some(daemon) {
                return Err(std::io::Error::other("bashd is gone"));
            }
            Ok(())
        });
    }
}

/// The process group of a tool still running, killed when dropped.
struct Group(Option<rustix::process::Pid>);

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

/// npm's registry and each scope's (`npm config get registry`, which reads the
/// person's `.npmrc` files and npm's own default). Without npm on `PATH`, `~/.npmrc`
/// is read, as pnpm and yarn classic read it too.
async fn npm(env: &Environment, runner: &Runner, found: &mut ToolSources) {
    // npm writes a log and makes its cache dir at each run: bashd's cache, not the
    // person's `~/.npm`, and no log.
    // JSON asked through npm's environment (its flag for it is a word of one front
    // end's in a daemon string, `front_end_words.rs`).
    let mut quiet = vec![
        ("npm_config_logs_max", "0".to_owned()),
        ("npm_config_json", "true".to_owned()),
    ];
    if let Some(caches) = &found.caches {
        let dir = caches.dir.join("npm").to_string_lossy().into_owned();
        quiet.push(("npm_config_cache", dir));
    }
    let asked = ask(env, runner, "npm", &["config", "list"], &quiet).await;
    let listed = match asked {
        Ok(json) => npm_registries(&json),
        Err(why) => {
            tracing::debug!("tool sources: npm: {why}");
            match env.home().map(|h| h.join(".npmrc")) {
                Some(path) => match read_small(&path) {
                    Some(text) => npmrc_registries(&text)
                        .into_iter()
                        .map(|(key, url)| (key, url, env.show(&path)))
                        .collect(),
                    None => Vec::new(),
                },
                None => Vec::new(),
            }
        }
    };
    for (key, url, origin) in listed {
        found.add(host_of(&url), &origin);
        if key == "registry" {
            found.set_env("npm_config_registry", without_userinfo(&url));
        }
    }
}

/// `registry` and `@scope:registry` of `npm config list`, in JSON: (key, URL, origin).
pub fn npm_registries(json: &str) -> Vec<(String, String, String)> {
    let Ok(serde_json::Value::Object(config)) = serde_json::from_str(json) else {
        return Vec::new();
    };
    config
        .iter()
        .filter(|(key, _)| {
            *key == "registry" || (key.starts_with('@') && key.ends_with(":registry"))
        })
        .filter_map(|(key, value)| {
            let url = value.as_str()?;
            Some((key.clone(), url.to_owned(), format!("npm config get {key}")))
        })
        .collect()
}

/// `registry=` and `@scope:registry=` lines of an `.npmrc`: (key, URL).
pub fn npmrc_registries(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('=')?;
            let key = key.trim();
            let wanted = key == "registry" || (key.starts_with('@') && key.ends_with(":registry"));
            wanted.then(|| (key.to_owned(), value.trim().trim_matches('"').to_owned()))
        })
        .collect()
}

/// pip's configured index and extra indexes (`pip config list`: its files and
/// `PIP_*` variables) and its built-in index and file host, which pip itself names.
async fn pip(env: &Environment, runner: &Runner, found: &mut ToolSources) {
    match ask(
        env,
        runner,
        "python3",
        &["-m", "pip", "config", "list"],
        &[],
    )
    .await
    {
        Ok(text) => {
            let mut extra = Vec::new();
            for (key, url) in pip_config(&text) {
                found.add(host_of(&url), &format!("pip config {key}"));
                if key.ends_with(".index-url") {
                    found.set_env("PIP_INDEX_URL", without_userinfo(&url));
                } else if key.ends_with(".extra-index-url") {
                    extra.push(without_userinfo(&url));
                }
            }
            if !extra.is_empty() {
                found.set_env("PIP_EXTRA_INDEX_URL", extra.join(" "));
            }
        }
        Err(why) => tracing::debug!("tool sources: pip config: {why}"),
    }
    // pip's own default index, from pip: never written here.
    const DEFAULT: &str = "from pip._internal.models.index import PyPI\nprint(PyPI.url)\nprint('https://' + PyPI.file_storage_domain + '/')";
    match ask(env, runner, "python3", &["-c", DEFAULT], &[]).await {
        Ok(text) => {
            for url in text.lines().filter(|l| !l.trim().is_empty()) {
                found.add(
                    host_of(url.trim()),
                    "pip's built-in index (pip._internal.models.index.PyPI)",
                );
            }
        }
        Err(why) => tracing::debug!("tool sources: pip's default index: {why}"),
    }
}

/// The index URLs of `pip config list`: (`global.index-url`, URL), one for each URL
/// of an extra-index-url that lists several.
pub fn pip_config(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !(key.ends_with(".index-url") || key.ends_with(".extra-index-url")) {
            continue;
        }
        let value = value.trim().trim_matches(|c| c == '\'' || c == '"');
        // pip prints a list as written: several URLs split by spaces or `\n`.
        for url in value.replace("\\n", " ").split_whitespace() {
            out.push((key.to_owned(), url.to_owned()));
        }
    }
    out
}

/// `go env GOPROXY GOSUMDB`: the module proxies and the checksum database.
async fn go(env: &Environment, runner: &Runner, found: &mut ToolSources) {
    match ask(env, runner, "go", &["env", "GOPROXY", "GOSUMDB"], &[]).await {
        Ok(text) => {
            let mut lines = text.lines();
            let (proxy, sumdb) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
            for url in go_proxies(proxy) {
                found.add(host_of(&url), "go env GOPROXY");
            }
            if let Some(entry) = go_sumdb(sumdb) {
                found.add(Some(entry), "go env GOSUMDB");
            }
            if !proxy.trim().is_empty() {
                let proxies: Vec<String> = proxy
                    .split_inclusive([',', '|'])
                    .map(without_userinfo)
                    .collect();
                found.set_env("GOPROXY", proxies.concat());
            }
            if !sumdb.trim().is_empty() {
                found.set_env("GOSUMDB", sumdb.trim().to_owned());
            }
        }
        Err(why) => tracing::debug!("tool sources: go env: {why}"),
    }
}

/// The URLs of a `GOPROXY` list (`direct` and `off` are no host).
pub fn go_proxies(value: &str) -> Vec<String> {
    value
        .split([',', '|'])
        .map(str::trim)
        .filter(|p| !p.is_empty() && *p != "direct" && *p != "off")
        .map(|p| {
            if p.contains("://") {
                p.to_owned()
            } else {
                // Go takes a proxy without a scheme as https.
                format!("https://{p}")
            }
        })
        .collect()
}

/// The host of a `GOSUMDB` (`name`, `name+key`, `name+key url`); `off` is none.
pub fn go_sumdb(value: &str) -> Option<String> {
    let value = value.trim();
    if value.is_empty() || value == "off" {
        return None;
    }
    let mut words = value.split_whitespace();
    let name = words.next()?;
    match words.next() {
        Some(url) if url.contains("://") => host_of(url),
        Some(url) => host_of(&format!("https://{url}")),
        None => host_of(&format!("https://{}", name.split('+').next()?)),
    }
}

/// Cargo's registries and source replacements, from `$CARGO_HOME/config.toml` (the
/// one config file outside every project), and the hosts each index cached under
/// `$CARGO_HOME/registry/index` declares in its `config.json`: where crates.io's
/// index is found, as nothing here names it. With nothing cached, crates.io is not
/// on the list until cargo has fetched once outside the sandbox (or the person lists
/// it) and the config is reloaded.
fn cargo(env: &Environment, found: &mut ToolSources) {
    let Some(home) = env.cargo_home() else {
        tracing::debug!("tool sources: cargo: no CARGO_HOME nor HOME");
        return;
    };
    for name in ["config.toml", "config"] {
        let path = home.join(name);
        let Some(text) = read_small(&path) else {
            continue;
        };
        for (key, url) in cargo_config(&text) {
            found.add(host_of(&url), &format!("{} {key}", env.show(&path)));
        }
        break;
    }
    let index = home.join("registry").join("index");
    let Ok(dirs) = std::fs::read_dir(&index) else {
        tracing::debug!(
            "tool sources: cargo: no index cached in {}",
            index.display()
        );
        return;
    };
    let mut dirs: Vec<PathBuf> = dirs.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let origin = format!("cargo's index cache {}", env.show(&dir));
        // `index.crates.io-1949cf8c6b5b557f`: the index's host, then cargo's hash.
        let host = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.rsplit_once('-'))
            .map(|(host, _)| host.to_owned());
        let Some(text) = read_small(&dir.join("config.json")) else {
            continue;
        };
        if let Some(host) = host {
            found.add(host_of(&format!("https://{host}/")), &origin);
        }
        for url in sparse_index_config(&text) {
            found.add(host_of(&url), &format!("{origin}/config.json"));
        }
    }
}

/// The index URLs of a cargo config: `[registries.NAME] index`, `[source.NAME]
/// registry`, `[registry] index`, as (`[registries.NAME]`, URL).
pub fn cargo_config(text: &str) -> Vec<(String, String)> {
    let Ok(config) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (section, key) in [("registries", "index"), ("source", "registry")] {
        if let Some(table) = config.get(section).and_then(|t| t.as_table()) {
            for (name, entry) in table {
                if let Some(url) = entry.get(key).and_then(|u| u.as_str()) {
                    out.push((format!("[{section}.{name}]"), url.to_owned()));
                }
            }
        }
    }
    if let Some(url) = config
        .get("registry")
        .and_then(|r| r.get("index"))
        .and_then(|u| u.as_str())
    {
        out.push(("[registry]".to_owned(), url.to_owned()));
    }
    out
}

/// The download and API URLs a sparse index's `config.json` declares.
pub fn sparse_index_config(text: &str) -> Vec<String> {
    let Ok(serde_json::Value::Object(config)) = serde_json::from_str(text) else {
        return Vec::new();
    };
    ["dl", "api"]
        .iter()
        .filter_map(|key| config.get(*key)?.as_str().map(str::to_owned))
        .collect()
}

/// Writes the `CARGO_HOME` of confined jobs' config: the person's cargo config
/// without its credentials (a token or credential provider may be written there
/// too), or none when the person has none.
fn cargo_home_config(env: &Environment, caches: &Caches) -> std::io::Result<()> {
    let target = caches.dir.join("cargo").join("config.toml");
    let person = env.cargo_home().and_then(|home| {
        read_small(&home.join("config.toml")).or_else(|| read_small(&home.join("config")))
    });
    let Some(text) = person.and_then(|text| cargo_config_without_credentials(&text)) else {
        return match std::fs::remove_file(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    };
    // Whole or not at all: a job reading it meanwhile sees the old one.
    let part = target.with_extension("toml.part");
    std::fs::write(&part, text)?;
    std::fs::rename(part, target)
}

/// A cargo config with every credential key gone, as TOML; `None` if it does not
/// parse.
pub fn cargo_config_without_credentials(text: &str) -> Option<String> {
    const SECRET: &[&str] = &[
        "token",
        "credential-provider",
        "global-credential-providers",
        "secret-key",
        "secret-key-subject",
    ];
    fn strip(table: &mut toml::Table) {
        table.retain(|key, _| !SECRET.contains(&key));
        for (_, value) in table.iter_mut() {
            if let Some(inner) = value.as_table_mut() {
                strip(inner);
            }
        }
    }
    let mut config = text.parse::<toml::Table>().ok()?;
    strip(&mut config);
    toml::to_string(&config).ok()
}

/// Maven's mirrors and repositories in `~/.m2/settings.xml`. Maven's built-in
/// central repository is not read: only the person's settings name hosts here.
fn maven(env: &Environment, found: &mut ToolSources) {
    let Some(path) = env.home().map(|h| h.join(".m2").join("settings.xml")) else {
        return;
    };
    let Some(text) = read_small(&path) else {
        tracing::debug!("tool sources: maven: no {}", path.display());
        return;
    };
    for (kind, url) in maven_settings(&text) {
        found.add(host_of(&url), &format!("{} <{kind}>", env.show(&path)));
    }
}

/// The `<url>` of each `<mirror>`, `<repository>` and `<pluginRepository>` of a
/// Maven `settings.xml`, comments left out: (element, URL).
pub fn maven_settings(text: &str) -> Vec<(String, String)> {
    let mut clean = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        clean.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            None => "",
        };
    }
    clean.push_str(rest);
    let mut out = Vec::new();
    for kind in ["mirror", "repository", "pluginRepository"] {
        let (open, close) = (format!("<{kind}>"), format!("</{kind}>"));
        let mut rest = clean.as_str();
        while let Some(start) = rest.find(&open) {
            let body = &rest[start + open.len()..];
            let end = body.find(&close).unwrap_or(body.len());
            if let Some(url) = element(&body[..end], "url") {
                out.push((kind.to_owned(), url));
            }
            rest = &body[end..];
        }
    }
    out
}

fn element(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + end].trim().to_owned())
}

/// The hosts of the git remotes of `root` (its `.git/config`, which confined jobs
/// cannot write: `.git` is read-only beneath every writable root). For the lead to
/// call with a session's roots too.
pub fn git_remotes(root: &Path) -> Vec<Source> {
    let Some(config) = git_config_path(root) else {
        return Vec::new();
    };
    let Some(text) = read_small(&config) else {
        return Vec::new();
    };
    git_config_remotes(&text)
        .into_iter()
        .filter_map(|(remote, url)| {
            Some(Source {
                entry: git_url_host(&url)?,
                origin: format!("git remote {remote} of {}", root.display()),
            })
        })
        .collect()
}

/// The config of the repository at `root`: `.git/config`, or for a worktree (`.git`
/// a file, `gitdir: ...`) its common dir's.
fn git_config_path(root: &Path) -> Option<PathBuf> {
    let dot_git = root.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if meta.is_dir() {
        return Some(dot_git.join("config"));
    }
    let text = read_small(&dot_git)?;
    let gitdir = root.join(text.trim().strip_prefix("gitdir:")?.trim());
    let common = match read_small(&gitdir.join("commondir")) {
        Some(common) => gitdir.join(common.trim()),
        None => gitdir,
    };
    Some(common.join("config"))
}

/// `url` and `pushurl` of each `[remote "NAME"]` of a git config: (NAME, URL).
pub fn git_config_remotes(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut remote: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            remote = line
                .strip_prefix("[remote \"")
                .and_then(|r| r.strip_suffix("\"]"))
                .map(str::to_owned);
            continue;
        }
        let Some(name) = &remote else { continue };
        if let Some((key, value)) = line.split_once('=') {
            let key = key.trim().to_ascii_lowercase();
            if key == "url" || key == "pushurl" {
                out.push((name.clone(), value.trim().trim_matches('"').to_owned()));
            }
        }
    }
    out
}

/// The entry of a git remote: a URL's host, or `host:22` for scp-like
/// `user@host:path`; none for a local path.
pub fn git_url_host(url: &str) -> Option<String> {
    if url.contains("://") {
        if url.starts_with("file://") {
            return None;
        }
        return host_of(url);
    }
    // `git@example.org:owner/repo.git`: ssh, as git reads it when the colon comes
    // before any slash.
    let (before, _) = url.split_once(':')?;
    if before.contains('/') {
        return None;
    }
    let host = before.rsplit('@').next()?;
    (!host.is_empty()).then(|| format!("{host}:22"))
}

/// The allow-list entry of a URL: `host` when its port is the scheme's (or none is
/// written), `host:port` otherwise, and an IP literal always with its port (alone it
/// would allow every port). Cargo's `sparse+` and `registry+` prefixes are read
/// through. `None` for a URL with no host (`file:`, a path).
pub fn host_of(url: &str) -> Option<String> {
    let url = url.trim();
    let url = url
        .strip_prefix("sparse+")
        .or_else(|| url.strip_prefix("registry+"))
        .or_else(|| url.strip_prefix("git+"))
        .unwrap_or(url);
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        "ssh" => 22,
        "git" => 9418,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let host = host.to_ascii_lowercase();
    if host.is_empty() || host.contains(['{', '}', ' ']) {
        return None;
    }
    let port = match port.filter(|p| !p.is_empty()) {
        Some(p) => p.parse::<u16>().ok()?,
        None => default,
    };
    let ip = host.parse::<std::net::IpAddr>().ok();
    let shown = match ip {
        Some(std::net::IpAddr::V6(_)) => format!("[{host}]"),
        _ => host,
    };
    let web_default = (port == 443 || port == 80) && port == default;
    Some(if ip.is_none() && web_default {
        shown
    } else {
        format!("{shown}:{port}")
    })
}

/// `url` with any `user:password@` taken out: what a confined job is told.
pub fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://{host}{path}"),
        None => url.to_owned(),
    }
}

/// A config file's text, when it is there, a regular file, and not larger than
/// [`FILE_BYTES`].
fn read_small(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(FILE_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests;
