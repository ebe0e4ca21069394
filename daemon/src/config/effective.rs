//! `bashd --check-config`: the config in force as a TOML file that loads to the same
//! settings. The sections of fixed keys are printed from their types
//! (`bashd_protocol::config::section_text`); `[env]`, `[mcp.clients]` and `[policy]`
//! are shown against what they change: the hardening set and the built-in rules.

use bashd_protocol::config::{self as file, ConfigFile, quoted, section_text};
use bashd_protocol::{FrontEnd, SettingFrom};

use super::{Config, HARDENING};
use crate::policy::BUILTIN_RULES;
use crate::sandbox::SandboxConfig;

impl Config {
    /// The config in force: every key, each one that differs from its default marked
    /// `# default: ...`, every hardening variable, every built-in rule with whether it
    /// is on, so that a copied example that loosens something shows it.
    pub fn effective_toml(&self) -> String {
        let (now, default) = (&self.file, &ConfigFile::default());
        let none = |_: &str| None;
        let mut out = String::new();
        out.push_str(&section_text("limits", &now.limits, &default.limits, &none));
        out.push('\n');
        out.push_str(&section_text(
            "timeouts",
            &now.timeouts,
            &default.timeouts,
            &none,
        ));
        out.push('\n');
        out.push_str(&section_text(
            "sessions",
            &now.sessions,
            &default.sessions,
            &none,
        ));
        out.push('\n');
        let containment = &now.containment;
        out.push_str(&section_text(
            "containment",
            containment,
            &default.containment,
            &none,
        ));
        out.push('\n');
        out.push_str(&sandbox_text(&self.sandbox, &now.sandbox));
        out.push('\n');
        out.push_str(&env_text(&self.env, &now.env));
        out.push('\n');
        out.push_str(&section_text("mcp", &now.mcp, &default.mcp, &none));
        out.push_str(&clients_text(&now.mcp));
        out.push('\n');
        out.push_str(&remote_text(&now.remote));
        out.push('\n');
        out.push_str(&policy_text(&now.policy));
        out
    }
}

/// `[sandbox]`, each of `default`, `network` and `floor` the file leaves unset shown
/// as such, then what each front end gets and where each setting came from (issue
/// 44): an agent's MCP calls and the command line differ unless the file says.
fn sandbox_text(config: &SandboxConfig, section: &file::Sandbox) -> String {
    let note = |key: &str| match key {
        "default" | "network" | "floor" => Some("each front end's own, below"),
        _ => None,
    };
    let mut out = section_text("sandbox", section, &file::Sandbox::default(), &note);
    for front_end in FrontEnd::ALL {
        let got = config.front_end(front_end);
        let from = |from: SettingFrom| match from {
            SettingFrom::File => "the file",
            SettingFrom::FrontEnd => "the front end's default",
            SettingFrom::Follows => "follows the other key the file writes",
        };
        out.push_str(&format!(
            "# {}: default = {} ({}), network = {} ({}), floor = {} ({})\n",
            match front_end {
                FrontEnd::Mcp => "an agent's MCP calls",
                FrontEnd::Cli => "the command line",
            },
            quoted(got.default.profile.as_str()),
            from(got.default_from),
            quoted(got.default.network.as_str()),
            from(got.network_from),
            quoted(got.floor.as_str()),
            from(got.floor_from),
        ));
    }
    out
}

/// `[env]` as the variables in force: each marked `# added` or `# default: ...` where
/// the file changed it, and `unset` for what was removed from the hardening set.
fn env_text(env: &[(String, String)], section: &file::Env) -> String {
    let mut out = "[env]\n".to_owned();
    for (name, value) in env {
        let default = HARDENING.iter().find(|(k, _)| k == name);
        let note = match default {
            None => "  # added".to_owned(),
            Some((_, d)) if d != value => format!("  # default: {}", quoted(d)),
            Some(_) => String::new(),
        };
        out.push_str(&format!(
            "{} = {}{note}\n",
            file::bare_key(name),
            quoted(value)
        ));
    }
    let removed: Vec<String> = HARDENING
        .iter()
        .filter(|(name, _)| !env.iter().any(|(k, _)| k == name))
        .map(|(name, _)| quoted(name))
        .collect();
    if !removed.is_empty() {
        out.push_str(&format!(
            "unset = [{}]  # removed from the hardening set\n",
            removed.join(", ")
        ));
    }
    if !section.pass.is_empty() {
        let list: Vec<String> = section.pass.iter().map(|name| quoted(name)).collect();
        out.push_str(&format!(
            "pass = [{}]  # the agent's credentials the MCP server passes into jobs\n",
            list.join(", ")
        ));
    }
    out
}

/// Each `[mcp.clients."NAME"]`, with the keys it gives.
fn clients_text(mcp: &file::Mcp) -> String {
    let mut out = String::new();
    let own = |key: &str| match key {
        "error_result_bytes" => Some("result_bytes if given, else the MCP server's own figure"),
        _ => Some("the MCP server's own figure for this client"),
    };
    for (name, budget) in &mcp.clients {
        let name = format!("mcp.clients.{}", quoted(name));
        out.push('\n');
        out.push_str(&section_text(
            &name,
            budget,
            &file::ClientBudget::default(),
            &own,
        ));
    }
    out
}

/// `[remote]`, bashc's, shown so that every section of the file is.
fn remote_text(remote: &file::Remote) -> String {
    let note = |key: &str| match key {
        "bridge_command" => Some("ssh ... HOST bashc bridge, over a control socket"),
        "bashc_path" => Some("the host's PATH finds bashc"),
        _ => None,
    };
    let mut out = section_text("remote", remote, &file::Remote::default(), &note);
    if let Some(command) = file::bridge_command_env() {
        out.push_str(&format!(
            "# ${} overrides bridge_command here: {}\n",
            file::BRIDGE_COMMAND_ENV,
            quoted(&command)
        ));
    }
    out
}

/// `[policy]`: every built-in rule with whether it is on, then the file's rules.
fn policy_text(policy: &file::Policy) -> String {
    let mut out = "[policy]\n".to_owned();
    for rule in BUILTIN_RULES {
        let on = !policy.disable.0.iter().any(|id| id == rule.id);
        let state = if on { "on" } else { "OFF" };
        out.push_str(&format!("# built-in rule {}: {state}\n", rule.id));
    }
    let disabled: Vec<String> = policy.disable.0.iter().map(|id| quoted(id)).collect();
    out.push_str(&format!("disable = [{}]\n", disabled.join(", ")));
    for rule in &policy.deny.0 {
        let args: Vec<String> = rule.args.0.iter().map(|a| quoted(a)).collect();
        out.push_str(&format!(
            "\n[[policy.deny]]\nid = {}\ncommand = {}\nargs = [{}]\nmessage = {}\n",
            quoted(&rule.id.0),
            quoted(&rule.command.0),
            args.join(", "),
            quoted(&rule.message.0)
        ));
    }
    out
}
