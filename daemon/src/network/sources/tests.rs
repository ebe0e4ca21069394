//! Each source read from fixture files in a temp `HOME`, the daemon's environment
//! pointed at it, and the tools' outputs parsed as they print them.

use super::*;

fn home_env(home: &Path) -> Environment {
    let home = home.to_str().unwrap();
    // No PATH: no tool is asked, only files are read.
    Environment::from_vars([("HOME", home)])
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn gather_files(env: &Environment, writable: &[PathBuf]) -> ToolSources {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(gather(env, writable, &None))
}

fn entries(found: &ToolSources) -> Vec<(&str, &str)> {
    found
        .sources
        .iter()
        .map(|s| (s.entry.as_str(), s.origin.as_str()))
        .collect()
}

#[test]
fn a_url_becomes_its_host_and_a_port_only_when_it_is_not_the_schemes() {
    for (url, entry) in [
        ("https://registry.example/", Some("registry.example")),
        ("http://registry.example/", Some("registry.example")),
        ("https://Registry.Example:443/x", Some("registry.example")),
        (
            "https://registry.example:8443/x",
            Some("registry.example:8443"),
        ),
        ("http://registry.example:443/", Some("registry.example:443")),
        ("sparse+https://index.example/", Some("index.example")),
        ("registry+https://git.example/index", Some("git.example")),
        ("https://user:tok@corp.example/simple", Some("corp.example")),
        ("http://127.0.0.2:4873/", Some("127.0.0.2:4873")),
        ("https://192.0.2.7/", Some("192.0.2.7:443")),
        ("http://[::1]:8080/", Some("[::1]:8080")),
        ("ssh://git@git.example/r.git", Some("git.example:22")),
        (
            "https://dl.example/{crate}/{version}/download",
            Some("dl.example"),
        ),
        ("file:///srv/index", None),
        ("/srv/index", None),
        ("https://x.example:99999/", None),
    ] {
        assert_eq!(host_of(url).as_deref(), entry, "{url}");
    }
}

#[test]
fn userinfo_never_reaches_a_job() {
    assert_eq!(
        without_userinfo("https://__token__:s3cret@corp.example/simple/?x=a@b"),
        "https://corp.example/simple/?x=a@b"
    );
    assert_eq!(
        without_userinfo("https://corp.example/"),
        "https://corp.example/"
    );
}

#[test]
fn npm_registry_and_scopes_from_its_config_and_from_npmrc() {
    let json = r#"{"registry": "http://127.0.0.2:4873/", "@corp:registry": "https://npm.corp.example/",
        "//127.0.0.2:4873/:_authToken": "(protected)", "cache": "/home/me/.npm"}"#;
    let listed = npm_registries(json);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.contains(&(
        "registry".to_owned(),
        "http://127.0.0.2:4873/".to_owned(),
        "npm config get registry".to_owned()
    )));
    assert!(npm_registries("not json").is_empty());

    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join(".npmrc"),
        "registry=http://127.0.0.2:4873/\n//127.0.0.2:4873/:_authToken=npm_SECRET\n@corp:registry=\"https://npm.corp.example/\"\n",
    );
    let found = gather_files(&home_env(dir.path()), &[]);
    assert_eq!(
        &entries(&found)[..2],
        [
            ("127.0.0.2:4873", "~/.npmrc"),
            ("npm.corp.example", "~/.npmrc")
        ]
    );
    assert!(found.env.contains(&(
        "npm_config_registry".to_owned(),
        "http://127.0.0.2:4873/".to_owned()
    )));
    assert!(!format!("{found:?}").contains("npm_SECRET"));
}

#[test]
fn pip_indexes_as_pip_config_list_prints_them() {
    let text = "global.index-url='https://__token__:tok@pypi.corp.example/simple'\n\
                global.extra-index-url='https://a.example/simple\\nhttps://b.example:8443/simple'\n\
                :env:.index-url='https://env.example/simple'\n\
                global.cert='/etc/ssl/certs/ca.crt'\n";
    let listed = pip_config(text);
    let urls: Vec<&str> = listed.iter().map(|(_, url)| url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://__token__:tok@pypi.corp.example/simple",
            "https://a.example/simple",
            "https://b.example:8443/simple",
            "https://env.example/simple"
        ]
    );
}

#[test]
fn go_proxies_and_sumdb() {
    assert_eq!(
        go_proxies("https://proxy.corp.example,goproxy.example|direct"),
        ["https://proxy.corp.example", "https://goproxy.example"]
    );
    assert!(go_proxies("off").is_empty());
    assert_eq!(go_sumdb("sum.example").as_deref(), Some("sum.example"));
    assert_eq!(
        go_sumdb("sum.example+abc123").as_deref(),
        Some("sum.example")
    );
    assert_eq!(
        go_sumdb("sum.example+abc123 https://mirror.example:8443/sumdb").as_deref(),
        Some("mirror.example:8443")
    );
    assert_eq!(go_sumdb("off"), None);
}

#[test]
fn cargo_registries_replacements_and_the_index_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cargo = dir.path().join(".cargo");
    write(
        &cargo.join("config.toml"),
        r#"
[registries.corp]
index = "sparse+https://cargo.corp.example/index/"
token = "cargo_SECRET"
[source.crates-io]
replace-with = "mirror"
[source.mirror]
registry = "sparse+https://mirror.example:8443/"
[build]
jobs = 2
"#,
    );
    write(
        &cargo.join("registry/index/index.cached.example-1949cf8c6b5b557f/config.json"),
        r#"{"dl": "https://static.cached.example/crates", "api": "https://cached.example"}"#,
    );
    // An index with no config.json (a git index's cache): nothing read from it.
    std::fs::create_dir_all(cargo.join("registry/index/github.example-0123456789abcdef")).unwrap();
    let found = gather_files(&home_env(dir.path()), &[]);
    assert_eq!(
        entries(&found),
        [
            (
                "cargo.corp.example",
                "~/.cargo/config.toml [registries.corp]"
            ),
            (
                "mirror.example:8443",
                "~/.cargo/config.toml [source.mirror]"
            ),
            (
                "index.cached.example",
                "cargo's index cache ~/.cargo/registry/index/index.cached.example-1949cf8c6b5b557f"
            ),
            (
                "static.cached.example",
                "cargo's index cache ~/.cargo/registry/index/index.cached.example-1949cf8c6b5b557f/config.json"
            ),
            (
                "cached.example",
                "cargo's index cache ~/.cargo/registry/index/index.cached.example-1949cf8c6b5b557f/config.json"
            ),
        ]
    );
    // The confined jobs' CARGO_HOME carries the person's config, without the token.
    let caches = found.caches.as_ref().expect("caches under ~/.cache");
    assert_eq!(caches.dir, dir.path().join(".cache/bashd/tools"));
    let copied = std::fs::read_to_string(caches.dir.join("cargo/config.toml")).unwrap();
    assert!(copied.contains("cargo.corp.example"), "{copied}");
    assert!(copied.contains("replace-with"), "{copied}");
    assert!(!copied.contains("cargo_SECRET"), "{copied}");
    for sub in ["npm", "pip", "go-mod", "go-build", "cargo"] {
        assert!(caches.dir.join(sub).is_dir(), "{sub}");
    }
    let env = found.job_env();
    assert!(
        env.iter()
            .any(|(k, v)| k == "CARGO_HOME" && v.ends_with("bashd/tools/cargo"))
    );
    assert!(
        env.iter()
            .any(|(k, v)| k == "PIP_CACHE_DIR" && v.ends_with("bashd/tools/pip"))
    );
}

#[test]
fn no_cargo_config_and_nothing_cached_is_no_entry_and_no_copied_config() {
    let dir = tempfile::tempdir().unwrap();
    let found = gather_files(&home_env(dir.path()), &[]);
    assert!(found.sources.is_empty(), "{found:?}");
    let caches = found.caches.expect("caches");
    assert!(!caches.dir.join("cargo/config.toml").exists());
}

#[test]
fn maven_mirrors_and_repositories_but_not_commented_examples() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join(".m2/settings.xml"),
        r#"<settings>
  <servers><server><id>corp</id><password>mvn_SECRET</password></server></servers>
  <mirrors>
    <!-- <mirror><url>https://commented.example/</url></mirror> -->
    <mirror><id>corp</id><mirrorOf>*</mirrorOf><url>https://maven.corp.example/repo</url></mirror>
  </mirrors>
  <profiles><profile><repositories>
    <repository><id>extra</id><url>http://10.0.0.5:8081/repo</url></repository>
  </repositories>
  <pluginRepositories><pluginRepository><url>https://plugins.example/</url></pluginRepository></pluginRepositories>
  </profile></profiles>
</settings>"#,
    );
    let found = gather_files(&home_env(dir.path()), &[]);
    assert_eq!(
        entries(&found),
        [
            ("maven.corp.example", "~/.m2/settings.xml <mirror>"),
            ("10.0.0.5:8081", "~/.m2/settings.xml <repository>"),
            ("plugins.example", "~/.m2/settings.xml <pluginRepository>"),
        ]
    );
}

#[test]
fn git_remotes_of_the_writable_roots_and_of_a_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("src/app");
    write(
        &repo.join(".git/config"),
        "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://git.example/me/app.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[remote \"up\"]\n\turl = git@upstream.example:them/app.git\n\tpushurl = ssh://git@push.example:2222/them/app.git\n[remote \"local\"]\n\turl = /srv/git/app.git\n",
    );
    // A worktree of it: `.git` a file naming its gitdir, whose commondir is the repo's.
    let worktree = dir.path().join("src/wt");
    write(&repo.join(".git/worktrees/wt/commondir"), "../..\n");
    write(
        &worktree.join(".git"),
        &format!("gitdir: {}\n", repo.join(".git/worktrees/wt").display()),
    );
    let found = gather_files(&home_env(dir.path()), std::slice::from_ref(&repo));
    let origin = |name: &str| format!("git remote {name} of {}", repo.display());
    let got: Vec<(String, String)> = found
        .sources
        .iter()
        .map(|s| (s.entry.clone(), s.origin.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("git.example".to_owned(), origin("origin")),
            ("upstream.example:22".to_owned(), origin("up")),
            ("push.example:2222".to_owned(), origin("up")),
        ]
    );
    let from_worktree: Vec<String> = git_remotes(&worktree)
        .into_iter()
        .map(|s| s.entry)
        .collect();
    assert_eq!(
        from_worktree,
        ["git.example", "upstream.example:22", "push.example:2222"]
    );
}

#[test]
fn xdg_cache_home_places_the_caches_and_no_home_places_none() {
    let env = Environment::from_vars([("HOME", "/home/me"), ("XDG_CACHE_HOME", "/var/cache/me")]);
    assert_eq!(
        env.caches().unwrap().dir,
        Path::new("/var/cache/me/bashd/tools")
    );
    // A relative XDG_CACHE_HOME is ignored, as the spec says.
    let env = Environment::from_vars([("HOME", "/home/me"), ("XDG_CACHE_HOME", "rel")]);
    assert_eq!(
        env.caches().unwrap().dir,
        Path::new("/home/me/.cache/bashd/tools")
    );
    assert_eq!(Environment::default().caches(), None);
}
