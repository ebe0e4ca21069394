// A scripted MCP server on stdio that records what an agent program sends it and pushes
// every kind of server notification at it, to learn which of them reach the model
// (issue 32): run by tests/tests/agents as `node probe-server.mjs LOG`. Each message
// received is appended to LOG as one JSON line; each pushed text starts with "PUSH-" and
// names its kind, so a test finds it in the fake model's requests if the program passed
// it on. Plain Node, no packages: the agent programs need Node anyway.
import { appendFileSync } from "node:fs";
import { createInterface } from "node:readline";

const log = process.argv[2];
const record = (direction, message) =>
  appendFileSync(log, JSON.stringify({ at: Date.now(), direction, message }) + "\n");
const send = (message) => {
  record("out", message);
  process.stdout.write(JSON.stringify(message) + "\n");
};
const notify = (method, params) => send({ jsonrpc: "2.0", method, params });

let protocolVersion = "2025-06-18";
const pushAll = (progressToken, when) => {
  notify("notifications/message", { level: "warning", logger: "bashd", data: `PUSH-LOG ${when}: j4 ended with exit 1` });
  if (progressToken !== undefined) {
    notify("notifications/progress", { progressToken, progress: 1, total: 2, message: `PUSH-PROGRESS ${when}: j4 running` });
  }
  notify("notifications/resources/updated", { uri: "bashd://inbox", title: `PUSH-RESOURCE ${when}` });
  // Claude Code's channels (research preview): a server that declares
  // experimental["claude/channel"] pushes text into the session this way.
  notify("notifications/claude/channel", { content: `PUSH-CHANNEL ${when}: j4 ended with exit 1`, meta: { job: "j4" } });
  notify("notifications/tools/list_changed", {});
};

const tools = [
  {
    name: "probe",
    description: "Run a shell command (probe): answers with a fixed text and pushes notifications.",
    inputSchema: { type: "object", properties: { note: { type: "string" } } },
  },
];
// After the first call the tool list changes (notifications/tools/list_changed): a
// program that lists the tools again shows the model the new description.
let called = false;
const changedTools = () => [
  { ...tools[0], description: `${tools[0].description} PUSH-TOOLS: j4 ended with exit 1` },
];

createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  record("in", message);
  const { id, method, params } = message;
  if (id === undefined) return;
  const reply = (result) => send({ jsonrpc: "2.0", id, result });
  switch (method) {
    case "initialize":
      protocolVersion = params?.protocolVersion ?? protocolVersion;
      reply({
        protocolVersion,
        capabilities: {
          tools: { listChanged: true },
          logging: {},
          resources: { subscribe: true, listChanged: true },
          experimental: { "claude/channel": {} },
        },
        serverInfo: { name: "probe", version: "1.0.0" },
        instructions: "The probe server: call probe.",
      });
      break;
    case "tools/list":
      reply({ tools: called ? changedTools() : tools });
      break;
    case "resources/list":
      reply({ resources: [{ uri: "bashd://inbox", name: "inbox", mimeType: "text/plain" }] });
      break;
    case "resources/read":
      reply({ contents: [{ uri: "bashd://inbox", mimeType: "text/plain", text: "PUSH-RESOURCE-READ j4 ended" }] });
      break;
    case "resources/templates/list":
      reply({ resourceTemplates: [] });
      break;
    case "prompts/list":
      reply({ prompts: [] });
      break;
    case "tools/call": {
      const token = params?._meta?.progressToken;
      called = true;
      pushAll(token, "during the call");
      // Sent after the result as well: a program may drop what comes while no call
      // is open, or keep it for the next turn.
      setTimeout(() => {
        reply({ content: [{ type: "text", text: "PROBE-RESULT exit code: 0" }] });
        setTimeout(() => pushAll(undefined, "after the call"), 200);
      }, 300);
      break;
    }
    default:
      if (method === "ping" || method.startsWith("logging/") || method.startsWith("resources/")) reply({});
      else send({ jsonrpc: "2.0", id, error: { code: -32601, message: `no method ${method}` } });
  }
});
